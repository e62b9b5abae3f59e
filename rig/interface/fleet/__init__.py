"""The fleet: many stations, one central PostgreSQL (docs/architecture.md,
"The fleet: many stations"; docs/fleet.md).

- `central`: the central store (PostgreSQL, schema `fleet`, migrations in `migrations`), all
  its SQL;
- `replicator`: ships a station's finished cycles from its SQLite store, idempotently, in order;
- `dispatch`: campaigns submitted centrally and handed to the station holding their drives, on
  procrastinate (a job queue in the same PostgreSQL);
- `agent`: the station side: takes its campaigns, runs them with `rig run` (resumes them with
  `rig run --resume` after a crash), replicates, stops them on request;
- `views` and `dashboard`: the live browser dashboard over the central database or one store.
"""
