"""The run record ``tokenwatt collect`` writes: its windows, power, accuracy and environment,
one request's timings and the per-request file, and which spec values nobody stated.
"""
