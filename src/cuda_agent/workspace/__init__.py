"""The agent's workspace: the reference, the agent's files, the fixed binding infrastructure and SKILL.md."""
from cuda_agent.workspace.workspace import (
    AGENT_PATHS,
    PROTECTED_PATHS,
    PROTECTED_ROOTS,
    Workspace,
    create_workspace,
    is_protected,
    model_new_template,
    skill_text,
)

__all__ = ["AGENT_PATHS", "PROTECTED_PATHS", "PROTECTED_ROOTS", "Workspace", "create_workspace", "is_protected",
           "model_new_template", "skill_text"]
