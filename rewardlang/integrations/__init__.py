"""Adapters to the RL engines people run (docs/scale.md): :mod:`rewardlang.integrations.verl`,
:mod:`rewardlang.integrations.openrlhf`, the reward server (:mod:`rewardlang.integrations.server`) and Ray scoring
(:mod:`rewardlang.integrations.ray_score`). None imports its engine, torch or Ray until it is used."""
