"""verigym.agents -- agents that plug into any verigym env (DESIGN.md section 4)."""
