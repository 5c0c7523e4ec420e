//! A webhook routine's secret in views: hidden when it is the secret itself,
//! shown when it is a `${VAR}` reference (the name of a variable is not a
//! secret), and put back when a view is applied again.
//!
//! Round trip: `cairn routine show` (or `GET /api/routines/{id}`) prints the
//! marker [`REDACTED_SECRET`] in place of a literal secret; applying that
//! spec to the routine it came from keeps the stored secret, and applying it
//! where nothing is stored (a new name, a trigger without a secret) is
//! refused at `trigger.secret`, so the marker is never stored as a secret.

use super::{Routine, RoutineSpec, Trigger, ValidationError};

/// What a literal webhook secret is shown as.
pub const REDACTED_SECRET: &str = "***";

/// The variable a written secret names when it is a whole `${VAR}`
/// reference, read from the environment when a webhook arrives.
pub fn env_reference(secret: &str) -> Option<&str> {
    secret
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
}

impl RoutineSpec {
    /// A copy fit to show: a literal webhook secret replaced by
    /// [`REDACTED_SECRET`]; a `${VAR}` reference kept as written.
    pub fn redacted(&self) -> RoutineSpec {
        let mut shown = self.clone();
        if let Trigger::Webhook {
            secret: Some(secret),
            ..
        } = &mut shown.trigger
            && env_reference(secret).is_none()
        {
            *secret = REDACTED_SECRET.to_string();
        }
        shown
    }

    /// Puts the secret of `stored` (the routine this spec replaces) back
    /// where this spec carries the marker of a redacted view. An error at
    /// `trigger.secret` when there is no stored secret to keep.
    pub fn restore_secret(&mut self, stored: Option<&RoutineSpec>) -> Result<(), ValidationError> {
        let Trigger::Webhook {
            secret: Some(secret),
            ..
        } = &mut self.trigger
        else {
            return Ok(());
        };
        if secret != REDACTED_SECRET {
            return Ok(());
        }
        match stored.map(|s| &s.trigger) {
            Some(Trigger::Webhook {
                secret: Some(kept), ..
            }) => {
                kept.clone_into(secret);
                Ok(())
            }
            _ => Err(ValidationError {
                path: "trigger.secret".to_string(),
                message: format!(
                    "\"{REDACTED_SECRET}\" stands for a hidden secret and there is no stored one to keep; write the secret, or `${{VAR}}` to read it from the environment"
                ),
            }),
        }
    }
}

impl Routine {
    /// A copy fit to show: its spec [`RoutineSpec::redacted`].
    pub fn redacted(&self) -> Routine {
        Routine {
            spec: self.spec.redacted(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::routine::SpecFormat;

    fn hook(secret: &str) -> RoutineSpec {
        RoutineSpec::parse(
            &format!(
                "name: h\ntrigger: {{type: webhook, secret: \"{secret}\"}}\naction: {{type: notification, message: hi}}\n"
            ),
            SpecFormat::Yaml,
        )
        .unwrap()
    }

    fn secret_of(spec: &RoutineSpec) -> Option<&str> {
        match &spec.trigger {
            Trigger::Webhook { secret, .. } => secret.as_deref(),
            _ => None,
        }
    }

    #[test]
    fn literal_secrets_are_hidden_and_references_shown() {
        assert_eq!(secret_of(&hook("S3CR").redacted()), Some("***"));
        assert_eq!(
            secret_of(&hook("${HOOK}").redacted()),
            Some("${HOOK}"),
            "a variable's name is not a secret"
        );
        // Not a whole reference: the text is the secret.
        assert_eq!(secret_of(&hook("x${HOOK}").redacted()), Some("***"));
    }

    #[test]
    fn the_marker_keeps_the_stored_secret_or_is_refused() {
        let stored = hook("S3CR");
        let mut shown = stored.redacted();
        shown.restore_secret(Some(&stored)).unwrap();
        assert_eq!(shown, stored);

        let mut shown = stored.redacted();
        let err = shown.restore_secret(None).unwrap_err();
        assert_eq!(err.path, "trigger.secret");
        let mut other = hook("***");
        let manual = RoutineSpec::parse(
            "name: h\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n",
            SpecFormat::Yaml,
        )
        .unwrap();
        assert!(other.restore_secret(Some(&manual)).is_err());

        // A real secret replaces the stored one.
        let mut new = hook("N3W");
        new.restore_secret(Some(&stored)).unwrap();
        assert_eq!(secret_of(&new), Some("N3W"));
    }
}
