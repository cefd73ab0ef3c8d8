"""The benchmark spec (``specs/*.spec.yaml``): its load half, the checks its fields pass, the
engine a run launches, what a mode changed, and the accuracy suite files it names.
"""
