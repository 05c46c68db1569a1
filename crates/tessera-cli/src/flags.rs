//! Every format's writer options as `convert` flags, derived from the declarations in
//! the formats' codecs ([`tessera::formats::all_options`]): `--NAME` for each option,
//! its older spellings as aliases (`--compression`/`--compress`, `--generation`/`--gen`),
//! the help prefixed with the formats that take it. A format's new option is a flag
//! here with no change to the CLI. `-O NAME=VALUE` sets the same options.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use tessera::options::{OptionKind, OptionSpec, OptionValue};
use tessera::Format;

/// The heading the flags are listed under in `tessera convert --help`.
const HEADING: &str = "Format options (also -O NAME=VALUE; `tessera formats --options`)";

/// The writer options given as flags, in the order they came, by option name.
#[derive(Debug, Clone, Default)]
pub struct FormatFlags {
    /// `(option name, value)`: text as typed, or `Flag` for a switch.
    pub given: Vec<(String, OptionValue)>,
}

/// clap wants `'static` names; the options are few and made once per process.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn dashed(name: &str) -> String {
    name.replace('_', "-")
}

/// The argument id of an option (apart from every other `convert` argument's).
fn id(o: &OptionSpec) -> &'static str {
    leak(format!("format-option-{}", o.name))
}

fn value_name(kind: OptionKind) -> &'static str {
    match kind {
        OptionKind::Int => "N",
        OptionKind::Size => "BYTES",
        OptionKind::Path | OptionKind::Secret => "FILE",
        OptionKind::Hex(_) => "HEX",
        OptionKind::Compression => "METHOD",
        OptionKind::Choice(_) => "NAME",
        _ => "TEXT",
    }
}

/// "WTXT: generation number": the option's help after the formats that declare it.
fn help(o: &OptionSpec) -> String {
    let mut titles: Vec<&str> = Vec::new();
    for f in Format::ALL {
        if f.can_write() && f.codec().options.iter().any(|x| x.name == o.name) {
            let t = f.title();
            if !titles.contains(&t) {
                titles.push(t);
            }
        }
    }
    let mut h = format!("{}: {}", titles.join(", "), o.help);
    if let OptionKind::Hex(n) = o.kind {
        h.push_str(&format!(" ({} hex digits)", 2 * n));
    }
    if o.kind == OptionKind::Secret {
        h.push_str(" (a file)");
    }
    if let Some(bare) = o.flag_value {
        h.push_str(&format!(" (alone: {bare})"));
    }
    h
}

fn arg(o: &OptionSpec) -> Arg {
    let mut a = Arg::new(id(o))
        .long(leak(dashed(o.name)))
        .help(leak(help(o)))
        .help_heading(HEADING);
    for alias in o.aliases {
        a = a.visible_alias(leak(dashed(alias)));
    }
    match o.kind {
        OptionKind::Bool => a.action(ArgAction::SetTrue),
        // Repeatable: `--digest crc32c --digest sha256`, `--age-recipient` twice.
        OptionKind::Choice(_) | OptionKind::Texts => {
            a.action(ArgAction::Append).value_name(value_name(o.kind))
        }
        kind => {
            a = a.action(ArgAction::Set).value_name(value_name(kind));
            if let Some(bare) = o.flag_value {
                a = a.num_args(0..=1).default_missing_value(bare);
            }
            a
        }
    }
}

impl Args for FormatFlags {
    fn augment_args(mut cmd: Command) -> Command {
        for o in tessera::formats::all_options() {
            cmd = cmd.arg(arg(o));
        }
        cmd
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for FormatFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for o in tessera::formats::all_options() {
            let id = id(o);
            if o.kind == OptionKind::Bool {
                if m.get_flag(id) {
                    given.push((o.name.to_string(), OptionValue::Flag));
                }
            } else if let Some(values) = m.get_many::<String>(id) {
                for v in values {
                    given.push((o.name.to_string(), OptionValue::Text(v.clone())));
                }
            }
        }
        Ok(FormatFlags { given })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
