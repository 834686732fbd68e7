"""``python -m rewardlang`` (also what ``accelerate launch -m rewardlang train ...`` runs)."""

from rewardlang.cli import main

if __name__ == "__main__":  # scoring worker processes import this module again: they must not run the CLI
    main(process_exit=True)  # this call is the whole process: a clean end skips the teardown
