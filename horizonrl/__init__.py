"""horizonrl: multi-turn reinforcement learning for LLM agents in interactive text environments."""

__version__ = "0.1.0"
