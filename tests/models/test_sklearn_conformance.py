"""scikit-learn's own estimator checks, over both estimators in both dtypes.

float64 estimators pass every check. The float32 ones (the default dtype) fail one check, with this reason:"""
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import rfm

FLOAT32_REASON = ("float32 matrix products round differently with the number of rows in a batch (1-2 units in the "
                  "last place, ~2e-7 relative, above the check's rtol=1e-7); the same check passes with "
                  "dtype='float64'")


def expected_failures(estimator):
    if estimator.dtype == "float32":
        return {"check_methods_subset_invariance": FLOAT32_REASON}
    return {}


ESTIMATORS = [rfm.RFMRegressor(iters=2), rfm.RFMClassifier(iters=2),
              rfm.RFMRegressor(iters=2, dtype="float64"), rfm.RFMClassifier(iters=2, dtype="float64")]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failures)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_float64_estimators_have_no_expected_failure():
    assert expected_failures(ESTIMATORS[2]) == {} and expected_failures(ESTIMATORS[3]) == {}
