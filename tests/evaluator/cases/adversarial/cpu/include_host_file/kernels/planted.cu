#include "cuda_agent.h"
#include "/var/tmp/cuda-agent-adversarial/secret.txt"
