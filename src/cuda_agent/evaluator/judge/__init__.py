"""The judge: the trusted process of an evaluation. It makes the inputs, holds the reference and its outputs,
compares, times, and writes the verdict; the candidate runs in another process (`cuda_agent.evaluator.runner`)
that sees only its inputs and hands back outputs through shared memory."""
