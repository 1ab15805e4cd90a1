"""TF32 rounding emulated on a CPU: which of the fused kernel's two products (distances, or kernel values times V) makes
the error of a TF32 K v (issue 40; cited in rfm/core/fused.py). Inputs rounded to 10 mantissa bits (round to nearest),
products accumulated in float64; Laplace L = 10, n = 6,000, d = 100."""
import torch

torch.manual_seed(0)
def tf32(x):  # round-to-nearest to 10 mantissa bits
    i = x.float().view(torch.int32)
    i = (i + 0x1000) & ~0x1FFF
    return i.view(torch.float32)
n, d = 6000, 100
X = torch.randn(n, d)
v = torch.randn(n, 1)
X64, v64 = X.double(), v.double()
D64 = torch.cdist(X64, X64).square()
K64 = torch.exp(-D64.sqrt() / 10)
K64.fill_diagonal_(1.0)
ref = K64 @ v64
xx = X.square().sum(1)
def kv(dist_tf32, prod_tf32):
    Xa = tf32(X) if dist_tf32 else X
    dot = (Xa.double() @ Xa.double().T).float() if dist_tf32 else X @ X.T
    D = (xx[:, None] + xx[None, :] - 2 * dot).clamp_min(0)
    D.fill_diagonal_(0)
    K = torch.exp(-D.sqrt() / 10)
    if prod_tf32:
        return tf32(K).double() @ tf32(v).double()
    return K.double() @ v64
for a in (False, True):
    for b in (False, True):
        o = kv(a, b)
        print(f"dist tf32={a} prod tf32={b}: relerr {float((o - ref).norm() / ref.norm()):.2e}")
