//! Phrases people write to set reminders and schedules, in English and
//! French, and what a phrase not understood is told.

use super::*;

/// What people say to a reminder tool, in English and French: the phrase, its
/// zone, the normalized rule, and the next fire times after [`NOW`]
/// (Monday 9 March 2026, 06:17 in New York, 11:17 in Paris).
#[test]
fn reminder_phrases_in_english_and_french() {
    let ny = New_York;
    let cases: &[(&str, Tz, &str, &[&str])] = &[
        // English, New York (UTC-4 since 8 March).
        (
            "tomorrow at 9am",
            ny,
            "2026-03-10T13:00:00Z",
            &["2026-03-10T13:00:00Z"],
        ),
        (
            "next monday at 10",
            ny,
            "2026-03-16T14:00:00Z",
            &["2026-03-16T14:00:00Z"],
        ),
        (
            "in 1h30",
            ny,
            "2026-03-09T11:47:00Z",
            &["2026-03-09T11:47:00Z"],
        ),
        (
            "at 9am and 5pm",
            ny,
            "0 9,17 * * *",
            &[
                "2026-03-09T13:00:00Z",
                "2026-03-09T21:00:00Z",
                "2026-03-10T13:00:00Z",
            ],
        ),
        (
            "every day at 9am and 5pm",
            ny,
            "0 9,17 * * *",
            &[
                "2026-03-09T13:00:00Z",
                "2026-03-09T21:00:00Z",
                "2026-03-10T13:00:00Z",
            ],
        ),
        (
            "every day at 5pm, 9am and noon",
            ny,
            "0 9,12,17 * * *",
            &[
                "2026-03-09T13:00:00Z",
                "2026-03-09T16:00:00Z",
                "2026-03-09T21:00:00Z",
            ],
        ),
        (
            "at 9:00, 9:30, 17:00 and 17:30 on weekdays",
            ny,
            "0,30 9,17 * * 1-5",
            &[
                "2026-03-09T13:00:00Z",
                "2026-03-09T13:30:00Z",
                "2026-03-09T21:00:00Z",
            ],
        ),
        (
            "every weekday at 8am and at 6pm",
            ny,
            "0 8,18 * * 1-5",
            &["2026-03-09T12:00:00Z", "2026-03-09T22:00:00Z"],
        ),
        (
            "every other day",
            ny,
            "every 2 days at 00:00:00 from 2026-03-10",
            &["2026-03-10T04:00:00Z", "2026-03-12T04:00:00Z"],
        ),
        (
            "every other day at 9am",
            ny,
            "every 2 days at 09:00:00 from 2026-03-09",
            &[
                "2026-03-09T13:00:00Z",
                "2026-03-11T13:00:00Z",
                "2026-03-13T13:00:00Z",
            ],
        ),
        (
            "every 3 days at 7pm",
            ny,
            "every 3 days at 19:00:00 from 2026-03-09",
            &["2026-03-09T23:00:00Z", "2026-03-12T23:00:00Z"],
        ),
        (
            "on the 1st of every month",
            ny,
            "0 0 1 * *",
            &["2026-04-01T04:00:00Z", "2026-05-01T04:00:00Z"],
        ),
        (
            "on the 1st of every month at 9am",
            ny,
            "0 9 1 * *",
            &["2026-04-01T13:00:00Z", "2026-05-01T13:00:00Z"],
        ),
        (
            "on the 15th of each month at 8am",
            ny,
            "0 8 15 * *",
            &["2026-03-15T12:00:00Z", "2026-04-15T12:00:00Z"],
        ),
        (
            "every month on the 15th at 8am",
            ny,
            "0 8 15 * *",
            &["2026-03-15T12:00:00Z", "2026-04-15T12:00:00Z"],
        ),
        (
            "on the last day of every month at 18:00",
            ny,
            "0 18 L * *",
            &["2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z"],
        ),
        // French, Paris (UTC+1 until 29 March, then UTC+2).
        (
            "dans 1h30",
            Paris,
            "2026-03-09T11:47:00Z",
            &["2026-03-09T11:47:00Z"],
        ),
        (
            "dans 2 h 15",
            Paris,
            "2026-03-09T12:32:00Z",
            &["2026-03-09T12:32:00Z"],
        ),
        (
            "dans 2 h 15 min",
            Paris,
            "2026-03-09T12:32:00Z",
            &["2026-03-09T12:32:00Z"],
        ),
        (
            "demain à 9h",
            Paris,
            "2026-03-10T08:00:00Z",
            &["2026-03-10T08:00:00Z"],
        ),
        (
            "demain à 9h30",
            Paris,
            "2026-03-10T08:30:00Z",
            &["2026-03-10T08:30:00Z"],
        ),
        (
            "Lundi prochain à 10h",
            Paris,
            "2026-03-16T09:00:00Z",
            &["2026-03-16T09:00:00Z"],
        ),
        (
            "tous les jours à 9h et 17h",
            Paris,
            "0 9,17 * * *",
            &[
                "2026-03-09T16:00:00Z",
                "2026-03-10T08:00:00Z",
                "2026-03-10T16:00:00Z",
            ],
        ),
        (
            "à 9h et 17h",
            Paris,
            "0 9,17 * * *",
            &["2026-03-09T16:00:00Z", "2026-03-10T08:00:00Z"],
        ),
        (
            "tous les jours à 9h, 12h et 17h",
            Paris,
            "0 9,12,17 * * *",
            &[
                "2026-03-09T11:00:00Z",
                "2026-03-09T16:00:00Z",
                "2026-03-10T08:00:00Z",
            ],
        ),
        (
            "un jour sur deux",
            Paris,
            "every 2 days at 00:00:00 from 2026-03-10",
            &["2026-03-09T23:00:00Z", "2026-03-11T23:00:00Z"],
        ),
        (
            "un jour sur deux à 8h",
            Paris,
            "every 2 days at 08:00:00 from 2026-03-10",
            &["2026-03-10T07:00:00Z", "2026-03-12T07:00:00Z"],
        ),
        (
            "tous les deux jours à 20h",
            Paris,
            "every 2 days at 20:00:00 from 2026-03-09",
            &["2026-03-09T19:00:00Z", "2026-03-11T19:00:00Z"],
        ),
        (
            "le 1er de chaque mois",
            Paris,
            "0 0 1 * *",
            &["2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z"],
        ),
        (
            "le 1er de chaque mois à 9h",
            Paris,
            "0 9 1 * *",
            &["2026-04-01T07:00:00Z", "2026-05-01T07:00:00Z"],
        ),
        (
            "le 15 de tous les mois à 8h",
            Paris,
            "0 8 15 * *",
            &["2026-03-15T07:00:00Z", "2026-04-15T06:00:00Z"],
        ),
        (
            "le dernier jour de chaque mois à 18h",
            Paris,
            "0 18 L * *",
            &["2026-03-31T16:00:00Z", "2026-04-30T16:00:00Z"],
        ),
    ];
    for (expr, zone, normalized, fires) in cases {
        let s = parsed(expr, *zone, NOW);
        assert_eq!(s.normalized(), *normalized, "{expr}");
        let got: Vec<String> = s.fire_times(t(NOW)).take(fires.len()).map(rfc).collect();
        assert_eq!(got, *fires, "{expr} in {zone}");
        // Stored and reloaded, it keeps its fire times.
        let back = Schedule::from_normalized(&s.normalized(), *zone).unwrap();
        assert_eq!(back, s, "{expr}");
    }
}

#[test]
fn every_other_day_counts_calendar_days() {
    // First fire at the next 9:00 (today's has passed, so tomorrow), then every other day.
    let s = parsed("every other day at 9am", New_York, "2026-03-09T14:00:00Z");
    assert_eq!(s.kind(), ScheduleKind::Interval);
    assert_eq!(s.normalized(), "every 2 days at 09:00:00 from 2026-03-10");
    assert_eq!(
        s.describe(),
        "every 2 days at 09:00, from 2026-03-10 (America/New_York)"
    );
    assert_eq!(
        next(
            "every other day at 9am",
            New_York,
            "2026-03-09T14:00:00Z",
            2
        ),
        ["2026-03-10T13:00:00Z", "2026-03-12T13:00:00Z"]
    );
    // Calendar days, not 48 hours: 9:00 stays 9:00 across Paris's DST change (29 March)
    // and New York's (1 November).
    assert_eq!(
        next("un jour sur deux à 9h", Paris, "2026-03-27T00:00:00Z", 3),
        [
            "2026-03-27T08:00:00Z",
            "2026-03-29T07:00:00Z",
            "2026-03-31T07:00:00Z"
        ]
    );
    assert_eq!(
        next(
            "every other day at 9am",
            New_York,
            "2026-10-30T00:00:00Z",
            3
        ),
        [
            "2026-10-30T13:00:00Z",
            "2026-11-01T14:00:00Z",
            "2026-11-03T14:00:00Z"
        ]
    );
    // A time skipped by spring-forward fires at the end of the gap, like cron.
    assert_eq!(
        next(
            "every other day at 2:30",
            New_York,
            "2026-03-05T12:00:00Z",
            3
        ),
        [
            "2026-03-06T07:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-10T06:30:00Z"
        ]
    );
    // An explicit start date, and the normalized text parses back with or without a "now".
    let s = parsed("every 3 days at 7pm from 2026-04-01", Paris, NOW);
    assert_eq!(s.normalized(), "every 3 days at 19:00:00 from 2026-04-01");
    assert_eq!(
        next("every 3 days at 7pm from 2026-04-01", Paris, NOW, 2),
        ["2026-04-01T17:00:00Z", "2026-04-04T17:00:00Z"]
    );
    let text = s.normalized();
    assert_eq!(Schedule::from_normalized(&text, Paris).unwrap(), s);
    assert_eq!(parsed(&text, Paris, "2030-01-01T00:00:00Z"), s);
    // Restarted later, the phase is kept: 2026-04-01 + 3k days.
    assert_eq!(
        s.next_after(t("2026-05-01T00:00:00Z")).map(rfc).unwrap(),
        "2026-05-01T17:00:00Z"
    );
    assert_eq!(
        s.next_after(t("2026-05-01T17:00:00Z")).map(rfc).unwrap(),
        "2026-05-04T17:00:00Z"
    );
    // Plain "every 2 days" is still elapsed time from now.
    assert_eq!(
        parsed("every 2 days", Paris, NOW).normalized(),
        "every 172800s from 2026-03-09T10:17:00Z"
    );
    assert!(err("every 2 days at 9am from 2026-02-30", Paris, NOW).contains("expected a date"));
    assert!(Schedule::from_normalized("every 36h at 09:00:00 from 2026-03-10", Paris).is_err());
    assert!(Schedule::from_normalized("every 0 days at 09:00:00 from 2026-03-10", Paris).is_err());
}

#[test]
fn phrases_not_understood_say_what_was_and_was_not() {
    let cases: &[(&str, Tz, &str)] = &[
        (
            "tomorrow at 9am blah",
            New_York,
            "\"tomorrow at 9am blah\": understood \"tomorrow at 9am\"; could not understand \"blah\" (at word 4); expected the end of the phrase",
        ),
        (
            "demain à 9h s'il te plaît",
            Paris,
            "understood \"demain à 9h\"; could not understand \"s'il te plaît\" (at word 4)",
        ),
        (
            "every day at 9am and",
            New_York,
            "understood \"every day at 9am\"; could not understand \"and\" (at word 5)",
        ),
        (
            "tomorrow at lunch",
            New_York,
            "understood \"tomorrow at\"; could not understand \"lunch\" (at word 3); expected a time",
        ),
        (
            "every other week",
            New_York,
            "understood \"every other\"; could not understand \"week\" (at word 3); expected day",
        ),
        (
            "on the 1st of every week",
            New_York,
            "understood \"on the 1st of every\"; could not understand \"week\" (at word 6); expected month",
        ),
        (
            "le 1er de chaque semaine",
            Paris,
            "understood \"le 1er de chaque\"; could not understand \"semaine\" (at word 5); expected mois",
        ),
        (
            "un jour sur trois",
            Paris,
            "understood \"un jour sur\"; could not understand \"trois\" (at word 4)",
        ),
        // Several times where cron cannot say exactly them: rejected, not widened.
        (
            "at 9:15 and 17:30",
            New_York,
            "\"at 9:15 and 17:30\": one schedule cannot fire at exactly 09:15 and 17:30: cron would fire at every listed minute of every listed hour; use one schedule per time",
        ),
        (
            "tous les jours à 9h15 et 17h30",
            Paris,
            "cannot fire at exactly 09:15 and 17:30",
        ),
        (
            "tomorrow at 9am and 5pm",
            New_York,
            "\"tomorrow at 9am and 5pm\": a one-shot takes one time of day; use one schedule per time",
        ),
        (
            "every other day at 9am and 5pm",
            New_York,
            "a schedule every N days takes one time of day",
        ),
        ("soon", New_York, "not a cron expression or a known phrase"),
    ];
    for (expr, zone, want) in cases {
        let got = err(expr, *zone, NOW);
        assert!(got.contains(want), "{expr}: got {got:?}, want {want:?}");
    }
    assert!(matches!(
        Schedule::parse("tomorrow at 9am blah", New_York, t(NOW)),
        Err(ScheduleError::NotUnderstood { word: 4, .. })
    ));
}
