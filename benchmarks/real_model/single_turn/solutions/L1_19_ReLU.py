import torch
import torch.nn as nn

class ModelNew(nn.Module):
    """
    Simple model that performs a ReLU activation.
    """
    def __init__(self):
        super(ModelNew, self).__init__()
    
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Applies ReLU activation to the input tensor.

        Args:
            x (torch.Tensor): Input tensor of any shape.

        Returns:
            torch.Tensor: Output tensor with ReLU applied, same shape as input.
        """
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed

# Custom CUDA kernel for ReLU activation
@torch.cuda.amp.autocast()
def custom_relu(x):
    return torch.max(0, x)

class ModelNewCUDA(nn.Module):
    """
    Simple model that performs a ReLU activation using custom CUDA kernels.
    """
    def __init__(self):
        super(ModelNewCUDA, self).__init__()
    
    @torch.cuda.amp.autocast()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Applies ReLU activation to the input tensor.

        Args:
            x (torch.Tensor): Input tensor of any shape.

        Returns:
            torch.Tensor: Output tensor with ReLU applied, same shape as input.
        """
        return custom_relu(x)

# Compile the CUDA kernel
custom_relu_kernel = torch.utils.cpp_extension.load_inline(
    name='custom_relu',
    sources=[
        'custom_relu.cu'
    ],
    extra_cflags=['-O3']
)

def get_custom_relu_kernel():
    return custom_relu_kernel

if __name__ == "__main__":
    model_new_cuda = ModelNewCUDA()
    inputs = get_inputs()

    # Run the model with the custom CUDA kernel
    with torch.cuda.amp.autocast():
        output = model_new_cuda(*inputs)
        print(output.shape)  # Should be (4096, 393216)
