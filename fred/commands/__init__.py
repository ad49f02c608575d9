"""One module per ``fred`` subcommand; see :mod:`fred.cli` for the contract each follows."""
