"""The parts of ``compat.migration`` that work a page of threads at a time (``pages``)."""
