"""FRED in silicon and in numbers: the ``fred`` command line.

:mod:`fred.cli` dispatches to one module per subcommand in :mod:`fred.commands`; each parses
its options, calls the layer below (:mod:`studies`, :mod:`sysmodel`, :mod:`hdl`, :mod:`eda`)
and prints. :mod:`fred.parallel` and :mod:`fred.progress` run many points in a process pool or
on a Dask cluster, with progress bars. Nothing imports this package.
"""
