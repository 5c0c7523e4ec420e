//! Schedules: cron, intervals and one-shot instants, with time zones and DST.
