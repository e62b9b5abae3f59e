"""A campaign: N power-cut cycles per drive, all drives in parallel, everything into the store.

- `model`: a cycle's record (`CycleRecord`, what the store receives) and a running cycle
  (`Cycle`: the record and its live handles), `ResumePoint`, `DriveCounts`, `DriveSummary`;
- `observer`: the campaign's events and their subscribers (run log, progress, edges, resume);
- `drive`: `DriveRun`, one drive for the whole campaign (its loop and public API);
- `cutcycle/`: the cut cycle's wing: one cycle (`cycle`: phases, the teardown guarantee, then
  the record phase), its phases (`phases`, in order in `PHASES`), cut strategies (`cuts`), the
  blocks a check reads (`blocks`), the run-on window (`runon`);
- `endurance/`: the endurance wing: measured write intervals, PTS flow and steady state;
- `recording`: every store call of the campaign (the record phase among them);
- `preparation`: a drive's set-up;
- `parallel`: `run_campaign`, every drive in its own thread.

See docs/campaign.md ("Inside a campaign").
"""
