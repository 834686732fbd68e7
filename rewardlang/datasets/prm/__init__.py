"""PRLCoder's process-supervision data (``rewardlang prm-data``): the mutation and refactoring operators
(:mod:`.mutate`) and the labelling of every variant by running its tests in the sandbox (:mod:`.label`)."""
