import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a matrix multiplication, applies sigmoid, and sums the result.
    """
    def __init__(self, input_size, hidden_size):
        super(Model, self).__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        """
        Args:
            x: Input tensor of shape (batch_size, input_size).

        Returns:
            Output tensor of shape (batch_size, 1).
        """
        x = self.linear(x)
        x = torch.sigmoid(x)
        x = torch.sum(x, dim=1, keepdim=True)
        return x

def get_inputs():
    return [torch.rand(batch_size, input_size)]

def get_init_inputs():
    return [input_size, hidden_size]

# Define CUDA kernels for matrix multiplication and sigmoid
@torch.cuda.amp.autocast()
def matmul_and_sigmoid(x):
    # Assuming x is a 2D tensor of shape (batch_size, input_size)
    batch_size = x.shape[0]
    input_size = x.shape[1]
    
    # Allocate memory for the result
    result = torch.zeros(batch_size, 1).cuda()
    
    # Perform matrix multiplication and sigmoid in parallel
    with torch.no_grad():
        for i in range(batch_size):
            result[i] = torch.sigmoid(torch.dot(x[i], self.linear.weight))
    
    return result

# Define a custom forward method that uses the CUDA kernels
class ModelNew(nn.Module):
    """
    Simple model that performs a matrix multiplication, applies sigmoid, and sums the result.
    """
    def __init__(self, input_size, hidden_size):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        """
        Args:
            x: Input tensor of shape (batch_size, input_size).

        Returns:
            Output tensor of shape (batch_size, 1).
        """
        # Use the custom CUDA kernel for matrix multiplication and sigmoid
        result = matmul_and_sigmoid(x)
        return result

# Example usage
batch_size = 128
input_size = 32768
hidden_size = 32768

model_new = ModelNew(input_size, hidden_size)
inputs = get_inputs()
init_inputs = get_init_inputs()

with torch.cuda.amp.autocast():
    output = model_new(*inputs)

print(output.shape)  # Should print (128, 1)
