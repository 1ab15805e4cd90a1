"""IPython kernel configuration for the book's virtual environment: `make setup` copies it to
``.venv/etc/ipython/ipython_kernel_config.py``, which every kernel started from that environment reads (the book
build, the chapter tests, scripts/rerun.py, papermill).

ipykernel 7 logs "Kernel is running over TCP without encryption ..." at start-up, once per chapter executed. The
kernels here are started by a local process (jupyter-cache, nbmake, papermill) on the loopback interface with a
signed connection file: the message is not the reader's business, so it is filtered out. Nothing else is changed;
every other message of the kernel still shows.
"""
import logging

logging.getLogger("IPKernelApp").addFilter(lambda record: "without encryption" not in record.getMessage())
