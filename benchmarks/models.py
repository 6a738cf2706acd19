"""Networks built from ``torch.nn`` alone, for machines without torchvision.

:func:`resnet18_from_nn` has torchvision's ResNet-18 layout (the same convolutions, batch
norms and shapes), so ``benchmarks/torch_train_step.py`` and the resnet18 test of
``core/tests/test_torch_training.py`` run where torchvision cannot be installed;
:func:`without_kinks` makes a network's gradients move smoothly with its activations.
"""

from __future__ import annotations

__all__ = ["resnet18_from_nn", "without_kinks"]


def resnet18_from_nn(nn):
    """ResNet-18 (He et al. 2016, "Deep residual learning for image recognition", table 1):
    a 7x7 stride-2 stem and max pool, four stages of two basic blocks (two 3x3
    convolutions each, 64/128/256/512 channels, the later stages entered at stride 2
    with a 1x1 stride-2 projection), average pool and a 1000-way linear layer; the
    convolutions without bias, each followed by batch norm, as in torchvision."""
    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + self.skip(x))

    stages, cin = [], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        stages += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    return nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1), *stages, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(512, 1000))


def without_kinks(model, nn):
    """``model`` with every ``nn.ReLU`` made ``nn.SiLU`` and every ``nn.MaxPool2d`` an
    ``nn.AvgPool2d`` of the same window, in place (the convolutions as they were), and
    returned. A ReLU or a max pool sends the gradient down another path wherever a value
    lies within rounding of zero or of its window's maximum, so two FP32 runs that differ
    only in rounding can have gradients that differ by far more than the rounding;
    without the kinks the gradients differ in proportion (core/tests/
    test_torch_training.py::test_resnet18_matches_torch gives the measurements)."""
    for name, child in list(model.named_children()):
        if isinstance(child, nn.ReLU):
            setattr(model, name, nn.SiLU())
        elif isinstance(child, nn.MaxPool2d):
            setattr(model, name, nn.AvgPool2d(child.kernel_size, child.stride,
                                              child.padding))
        else:
            without_kinks(child, nn)
    return model
