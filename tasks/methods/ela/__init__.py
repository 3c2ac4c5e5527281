"""ELA entity linking (../shared/papers/ela-entity-linking-agent.md): settings, step machine, parsers, prompts/."""
