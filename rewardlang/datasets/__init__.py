"""Data builders: task data sets made here from packages and code of our own (C functions with harnesses and
GEPO groups of LLVM IR for OORL; see the modules)."""
