"""The scale suite's shared parts: protobuf encoding without generated stubs (proto), the two
clusters behind one interface (cluster), the load generator (bench), process and size helpers
(util), table and plot helpers (tables, plots). The curves are bench/scale/curve_*.py; the entry
point is bench/scale/scale.py."""
