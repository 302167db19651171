"""The contract kandev-dq checks: keys and instants, the tables, the AC catalogue, the rule index
and severity.

May import ``errors`` and ``text`` alone: every other layer reads the contract."""
