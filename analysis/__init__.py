# shardbench analysis: HDF5 point files (docs/HDF5_SCHEMA.md) -> tidy tables -> comparisons,
# the paper's tables, plots and a report (docs/REPORTS.md). Run with Debian's /usr/bin/python3.
