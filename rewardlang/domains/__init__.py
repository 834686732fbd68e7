"""Task domains whose programs are judged by a simulator rather than unit tests (see docs/robot.md).

A domain here is a pure library (no import of the runtime, the sandbox or the trainers): the runtime's
components import it, never the other way round.
"""
