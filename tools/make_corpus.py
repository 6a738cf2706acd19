"""Write the development corpus: the conv layers of torchvision's model definitions.

    python tools/make_corpus.py [--out core/src/wticonv/data/corpus.csv]

Each network in :data:`NETWORKS` is built from its torchvision definition (no weights),
moved to PyTorch's ``meta`` device (shapes only: nothing is computed or allocated) and run
once on an input of its usual size; a forward hook on every ``nn.Conv2d`` records the
layer's input picture and parameters. Detection models run their backbone, neck and box
heads only (the parts that are convolutions; their post-processing needs torchvision's
C++ operators). Identical layers of a network are merged with a count.

The output has one row per distinct layer: network, family, split (``dev``: networks that
models may be developed and fitted on; ``test``: networks kept for the final held-out
measurement), C H W K R S, stride, pad, dilation, groups, count and a tag (the module's
name in the model). Batch size is not part of a layer: ``wticonv evaluate NAME -n N``
chooses it.

Needs torch and torchvision, development-only (``pip install torch==2.13.0
torchvision==0.28.0``). PyPI's torchvision 0.28.0 fails at import beside the CPU build of
torch 2.13.0 (``operator torchvision::nms does not exist``): it registers shape functions
for its C++ operators, which this build cannot load. The model definitions need none of
them, so the script stubs out that one module (``torchvision._meta_registrations``)
before the import.
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys
import types
from pathlib import Path

#: (network, family, split, input H and W, how to run it). "classify": model(x);
#: "detect": backbone (with FPN), then the RPN / box heads on its features; "ssd": backbone,
#: then head; "mask": detect, plus the mask / keypoint head on 14x14 RoI features.
NETWORKS = [
    # early classics
    ("alexnet", "classic", "dev", 224, "classify"),
    ("vgg11", "classic", "dev", 224, "classify"),
    ("vgg13", "classic", "test", 224, "classify"),
    ("vgg19", "classic", "dev", 224, "classify"),
    ("googlenet", "inception", "dev", 224, "classify"),
    ("squeezenet1_0", "squeeze", "test", 224, "classify"),
    ("squeezenet1_1", "squeeze", "dev", 224, "classify"),
    # residual
    ("resnet18", "resnet", "dev", 224, "classify"),
    ("resnet34", "resnet", "test", 224, "classify"),
    ("resnet101", "resnet", "dev", 224, "classify"),
    ("wide_resnet50_2", "resnet", "dev", 224, "classify"),
    ("densenet121", "densenet", "dev", 224, "classify"),
    ("densenet169", "densenet", "test", 224, "classify"),
    # grouped
    ("resnext50_32x4d", "grouped", "dev", 224, "classify"),
    ("resnext101_64x4d", "grouped", "test", 224, "classify"),
    ("regnet_x_800mf", "regnet", "test", 224, "classify"),
    ("regnet_x_1_6gf", "regnet", "dev", 224, "classify"),
    ("regnet_y_400mf", "regnet", "dev", 224, "classify"),
    ("regnet_y_800mf", "regnet", "dev", 224, "classify"),
    ("regnet_y_3_2gf", "regnet", "test", 224, "classify"),
    # mobile
    ("mobilenet_v3_large", "mobile", "dev", 224, "classify"),
    ("mobilenet_v3_small", "mobile", "test", 224, "classify"),
    ("mnasnet1_0", "mobile", "dev", 224, "classify"),
    ("mnasnet0_75", "mobile", "test", 224, "classify"),
    ("shufflenet_v2_x1_0", "mobile", "dev", 224, "classify"),
    ("shufflenet_v2_x2_0", "mobile", "test", 224, "classify"),
    # squeeze-and-excitation
    ("efficientnet_b0", "efficientnet", "dev", 224, "classify"),
    ("efficientnet_b2", "efficientnet", "test", 288, "classify"),
    ("efficientnet_b4", "efficientnet", "dev", 380, "classify"),
    ("efficientnet_v2_s", "efficientnet", "dev", 384, "classify"),
    # modern
    ("convnext_tiny", "modern", "dev", 224, "classify"),
    ("convnext_small", "modern", "test", 224, "classify"),
    ("maxvit_t", "modern", "dev", 224, "classify"),
    ("swin_t", "modern", "dev", 224, "classify"),
    ("vit_b_16", "modern", "dev", 224, "classify"),
    # dilated segmentation backbones
    ("fcn_resnet50", "segmentation", "dev", 520, "classify"),
    ("deeplabv3_resnet50", "segmentation", "dev", 520, "classify"),
    ("deeplabv3_mobilenet_v3_large", "segmentation", "test", 520, "classify"),
    ("lraspp_mobilenet_v3_large", "segmentation", "dev", 520, "classify"),
    # detection backbones, necks and heads
    ("fasterrcnn_resnet50_fpn", "detection", "dev", 800, "detect"),
    ("fasterrcnn_mobilenet_v3_large_fpn", "detection", "test", 800, "detect"),
    ("retinanet_resnet50_fpn", "detection", "dev", 800, "detect"),
    ("fcos_resnet50_fpn", "detection", "test", 800, "detect"),
    ("maskrcnn_resnet50_fpn", "detection", "dev", 800, "mask"),
    ("ssd300_vgg16", "detection", "dev", 300, "ssd"),
    ("ssdlite320_mobilenet_v3_large", "detection", "dev", 320, "ssd"),
]

COLUMNS = ["network", "family", "split", "C", "H", "W", "K", "R", "S", "stride", "pad_h",
           "pad_w", "dilation", "groups", "count", "tag"]


def _import_torchvision():
    sys.modules.setdefault("torchvision._meta_registrations",
                           types.ModuleType("torchvision._meta_registrations"))
    import torch
    import torchvision.models

    return torch, torchvision.models


def _run(torch, model, how: str, size: int) -> None:
    x = torch.empty(1, 3, size, size, device="meta")
    with torch.no_grad():
        if how == "classify":
            model(x)
            return
        feats = model.backbone(x)
        feats = list(feats.values()) if isinstance(feats, dict) else [feats]
        if how == "ssd":
            model.head(feats)
            return
        if hasattr(model, "rpn"):
            model.rpn.head(feats)
        else:
            model.head(feats)
        if how == "mask":
            model.roi_heads.mask_head(torch.empty(1, 256, 14, 14, device="meta"))


def layers(torch, models, name: str, family: str, size: int, how: str) -> list[dict]:
    """The distinct conv layers of network ``name`` as CSV rows (without network, family,
    split), with their counts, in the order first met."""
    extra = {} if how == "classify" and family != "segmentation" else {"weights_backbone": None}
    model = models.get_model(name, weights=None, **extra).eval().to("meta")
    seen: dict[tuple, dict] = {}
    order = collections.Counter()

    def hook(mod, inputs, _out, tag):
        _, c, h, w = inputs[0].shape
        if mod.stride[0] != mod.stride[1] or mod.dilation[0] != mod.dilation[1]:
            raise SystemExit(f"{name}.{tag}: stride {mod.stride}, dilation {mod.dilation}: "
                             "the corpus format holds one stride and one dilation")
        if isinstance(mod.padding, str):
            raise SystemExit(f"{name}.{tag}: padding {mod.padding!r} is not numeric")
        key = (c, h, w, mod.out_channels, *mod.kernel_size, mod.stride[0], *mod.padding,
               mod.dilation[0], mod.groups)
        order[key] += 1
        seen.setdefault(key, {"tag": tag})

    for tag, mod in model.named_modules():
        if isinstance(mod, torch.nn.Conv2d):
            mod.register_forward_hook(lambda m, i, o, tag=tag: hook(m, i, o, tag))
    _run(torch, model, how, size)
    rows = []
    for key, info in seen.items():
        row = dict(zip(COLUMNS[3:15], key))
        row["count"] = order[key]
        row["tag"] = info["tag"]
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1]
                                         / "core/src/wticonv/data/corpus.csv"))
    args = ap.parse_args(argv)
    torch, models = _import_torchvision()
    out = []
    for name, family, split, size, how in NETWORKS:
        rows = layers(torch, models, name, family, size, how)
        print(f"{name:34s} {family:13s} {split:4s} {len(rows):3d} distinct layers, "
              f"{sum(r['count'] for r in rows):3d} in all", file=sys.stderr)
        out += [{"network": name, "family": family, "split": split, **r} for r in rows]
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    print(f"wrote {len(out)} rows for {len(NETWORKS)} networks to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
