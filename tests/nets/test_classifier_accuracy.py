"""rfm.nets.classifier.classifier_accuracy: the share of inputs whose decoded class is the label."""
import torch

from rfm import nets
from rfm.nets.classifier import classifier_accuracy


def test_one_output_is_read_as_class_one_above_one_half():
    net = nets.MLP(1, [1], 1, generator=0)
    with torch.no_grad():  # f(x) = relu(x): class 1 exactly where x > 0.5
        net.layers[0].weight.fill_(1.0)
        net.layers[1].weight.fill_(1.0)
    X = torch.tensor([[0.0], [1.0], [2.0], [0.2]])
    assert classifier_accuracy(net, X, torch.tensor([0, 1, 0, 0])) == 0.75
    assert classifier_accuracy(net, X, torch.tensor([0, 1, 1, 0])) == 1.0


def test_several_outputs_are_read_by_their_largest():
    net = nets.MLP(2, [2], 2, generator=0)
    with torch.no_grad():  # f(x) = relu(x): the class is the larger coordinate
        net.layers[0].weight.copy_(torch.eye(2))
        net.layers[1].weight.copy_(torch.eye(2))
    X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, 2.0]])
    assert classifier_accuracy(net, X, torch.tensor([0, 1, 1])) == 2 / 3
