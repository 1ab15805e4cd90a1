"""In-context learning data (rfm.data.icl): prompts, task pools, representations, the ridge predictor."""
import pytest
import torch

from rfm.data import icl as data_icl
from rfm.nets import icl


def test_the_data_names_are_importable_from_rfm_nets_icl_as_before():
    for name in ("Prompts", "LinearTasks", "ReLUTeacherTasks", "vectorise", "tokens", "ridge_predict"):
        assert getattr(icl, name) is getattr(data_icl, name)


def test_linear_task_labels_are_the_inner_product_with_the_task_weights():
    tasks = data_icl.LinearTasks(3, n_tasks=4, generator=0, dtype="float64")
    p = tasks.sample(5, 7, generator=1)
    w = tasks.weights[p.task_index]
    torch.testing.assert_close(p.y, torch.einsum("bnd,bd->bn", p.X, w), rtol=0, atol=1e-12)
    torch.testing.assert_close(p.y_query, torch.einsum("bd,bd->b", p.x_query, w), rtol=0, atol=1e-12)


def test_ridge_predict_recovers_a_noiseless_linear_task_with_enough_context():
    p = data_icl.LinearTasks(3, generator=0, dtype="float64").sample(4, 10, generator=2)
    torch.testing.assert_close(data_icl.ridge_predict(p), p.y_query, rtol=0, atol=1e-10)


def test_vectorise_and_tokens_lay_out_the_prompt():
    p = data_icl.LinearTasks(2, dtype="float64").sample(1, 2, generator=0)
    v = data_icl.vectorise(p)[0]
    expected = torch.cat([p.X[0, 0], p.y[0, :1], p.X[0, 1], p.y[0, 1:], p.x_query[0]])
    assert torch.equal(v, expected)
    T = data_icl.tokens(p)[0]
    assert T.shape == (3, 3) and T[-1, -1] == 0 and torch.equal(T[-1, :2], p.x_query[0])
    with pytest.raises(TypeError, match="rfm.data.icl.Prompts"):
        data_icl.check_prompts(torch.zeros(2))
