"""``python -m rewardlang`` (also what ``accelerate launch -m rewardlang train ...`` runs)."""

from rewardlang.cli import main

main()
