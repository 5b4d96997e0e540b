"""Reinforcement-learning maths as pure tensor functions: advantage estimators, losses, KL."""
