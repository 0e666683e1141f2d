"""placeholder"""
def add_arguments(p): pass
def run_suite(lab, a): return 0
