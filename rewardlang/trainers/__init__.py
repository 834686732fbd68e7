"""Trainers that consume compiled reward specs: one module per algorithm."""
