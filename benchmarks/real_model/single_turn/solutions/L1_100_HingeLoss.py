import torch
import torch.nn as nn

class ModelNew(nn.Module):
    """
    A model that computes Hinge Loss for binary classification tasks.

    Parameters:
        None
    """
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))

batch_size = 32768
input_shape = (32768,)
dim = 1

def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]

def get_init_inputs():
    return []

# Define the CUDA kernel for Hinge Loss
@torch.cuda.amp.autocast()
def hinge_loss_kernel(predictions, targets):
    loss = torch.clamp(1 - predictions * targets, min=0)
    return torch.mean(loss)

# Compile the CUDA kernel
hinge_loss_kernel = torch.utils.cpp_extension.load_inline(
    name='hinge_loss_kernel',
    sources=[
        """
        #include <torch/autograd.h>
        #include <torch/torch.h>

        __global__ void hinge_loss_kernel(float* predictions, float* targets, int batch_size) {
            int idx = blockIdx.x * blockDim.x + threadIdx.x;
            if (idx >= batch_size) return;

            float prediction = predictions[idx];
            float target = targets[idx];

            float loss = torch.clamp(1 - prediction * target, min=0);
            atomicAdd(&loss_sum, loss);
        }
        """,
    ],
    extra_cuda_cflags=['-O3'],
)

# Define the forward method with CUDA kernel
def forward(self, predictions, targets):
    return hinge_loss_kernel(predictions.data_ptr(), targets.data_ptr(), batch_size)
