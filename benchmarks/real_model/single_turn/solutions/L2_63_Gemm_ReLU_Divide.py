import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a matrix multiplication, applies ReLU, and divides by a constant.
    """
    def __init__(self, in_features, out_features, divisor):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        x = self.linear(x)
        x = torch.relu(x)
        x = x / self.divisor
        return x

batch_size = 1024
in_features = 8192
out_features = 8192
divisor = 2.0

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, divisor]

# Define CUDA kernels for matrix multiplication and division
@torch.cuda.jit.script
def matmul_kernel(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    result = torch.zeros_like(A)
    for i in range(A.size(0)):
        for j in range(B.size(1)):
            for k in range(A.size(2)):
                result[i, j] += A[i, k] * B[k, j]
    return result

@torch.cuda.jit.script
def divide_kernel(x: torch.Tensor, divisor: float) -> torch.Tensor:
    return x / divisor

# Define the forward method with custom CUDA kernels
class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        # Perform matrix multiplication using custom CUDA kernel
        A = self.linear.weight
        B = x.view(-1, self.linear.in_features)
        C = matmul_kernel(A, B).view(x.size())
        
        # Apply ReLU
        D = torch.relu(C)
        
        # Divide by constant using custom CUDA kernel
        E = divide_kernel(D, self.divisor)
        
        return E

# Example usage
model_new = ModelNew(in_features, out_features, divisor)
inputs = get_inputs()
outputs = model_new(*inputs)

print(outputs)
