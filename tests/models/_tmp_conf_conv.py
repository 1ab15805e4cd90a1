import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks
from rfm.models.conv import ConvRFM, ConvRFMClassifier, DeepConvRFM

EST = [ConvRFM(iters=1, dtype="float64"), ConvRFMClassifier(iters=1, dtype="float64"),
       DeepConvRFM(depth=2, width=4, iters=1, dtype="float64"), ConvRFM(iters=1), ConvRFMClassifier(iters=1)]

@parametrize_with_checks(EST)
def test_conf(estimator, check):
    check(estimator)
