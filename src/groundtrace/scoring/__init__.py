"""Scoring records with metrics: the Evaluator in this process, and a scoring child process with its side of the pipe."""
