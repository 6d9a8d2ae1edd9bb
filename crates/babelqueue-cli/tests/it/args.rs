//! The command line itself: help on every argument, closed sets as value enums, the URL from
//! the environment, shell completions, the missing-feature hint.

use crate::common;

use common::{babelqueue, babelqueue_with, json_lines, printed, stdout};

/// Every argument of `command` and its subcommands that has no help, as `path --arg`.
fn undocumented(command: &clap::Command, path: &str, out: &mut Vec<String>) {
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if matches!(id, "help" | "version") {
            continue;
        }
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        if help.trim().is_empty() {
            out.push(format!("{path} {id}"));
        }
    }
    for sub in command.get_subcommands() {
        if sub.get_about().is_none() && sub.get_name() != "help" {
            out.push(format!("{path} {} (no about)", sub.get_name()));
        }
        undocumented(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

#[test]
fn every_argument_and_subcommand_has_help() {
    let command = babelqueue_cli::command();
    command.clone().debug_assert();
    let mut missing = Vec::new();
    undocumented(&command, "babelqueue", &mut missing);
    assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    // The walk reaches the nested commands (it would pass vacuously otherwise).
    let dlq = command.find_subcommand("dlq").expect("dlq");
    let names: Vec<&str> = dlq.get_subcommands().map(clap::Command::get_name).collect();
    assert_eq!(names, ["list", "show", "retry", "remove", "redrive"]);
}

#[test]
fn a_bad_output_value_exits_2_and_lists_the_allowed_values() {
    let out = babelqueue(
        &[
            "dlq",
            "list",
            "memory://",
            "--queue",
            "q",
            "--output",
            "xml",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", printed(&out));
    let err = common::stderr(&out);
    assert!(err.contains("[possible values: json, human]"), "{err}");
}

#[test]
fn the_url_comes_from_babelqueue_url_when_absent() {
    // No URL on the command line: BABELQUEUE_URL is used.
    let out = babelqueue_with(
        &["publish", "--queue", "q", "--urn", "urn:env"],
        None,
        &[("BABELQUEUE_URL", "memory://")],
    );
    assert!(out.status.success(), "{}", printed(&out));
    assert_eq!(json_lines(&stdout(&out))[0]["job"], "urn:env");

    // Its value is what the command connects to (and a password in it is never printed).
    let out = babelqueue_with(
        &["dlq", "show", "--queue", "q", "some-id"],
        None,
        &[("BABELQUEUE_URL", "mqtt://user:hunter2@localhost")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    assert!(
        printed(&out).contains("unsupported broker URL scheme \"mqtt\""),
        "{}",
        printed(&out)
    );
    assert!(!printed(&out).contains("hunter2"), "{}", printed(&out));

    // Neither on the command line nor in the environment: a usage error.
    let out = babelqueue(&["publish", "--queue", "q", "--urn", "urn:env"], None);
    assert_eq!(out.status.code(), Some(2), "{}", printed(&out));

    // --help names the variable and never shows its value.
    let help = babelqueue_with(
        &["consume", "--help"],
        None,
        &[("BABELQUEUE_URL", "redis://:hunter2@localhost")],
    );
    assert!(
        stdout(&help).contains("BABELQUEUE_URL"),
        "{}",
        stdout(&help)
    );
    assert!(!printed(&help).contains("hunter2"), "{}", printed(&help));
}

#[test]
fn completions_are_generated_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = babelqueue(&["completions", shell], None);
        assert!(out.status.success(), "{shell}: {}", printed(&out));
        let script = stdout(&out);
        for word in ["publish", "consume", "dlq", "inspect", "redrive", "remove"] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
    }
    let bad = babelqueue(&["completions", "tcsh"], None);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_missing_feature_hint_names_the_cli_crate() {
    // Exactly what the facade returns for a scheme whose transport is not compiled in.
    let facade = babelqueue::Error::UnsupportedScheme {
        scheme: "kafka".into(),
        hint: "this build does not include the babelqueue-transport-kafka transport; enable the \
               `kafka` feature of the `babelqueue` crate"
            .into(),
    };
    let shown = babelqueue_cli::cli_hint(facade).to_string();
    assert!(
        shown.contains("`kafka` feature of the `babelqueue-cli` crate"),
        "{shown}"
    );
    assert!(
        shown.contains("cargo install babelqueue-cli --features kafka"),
        "{shown}"
    );
    assert!(!shown.contains("of the `babelqueue` crate"), "{shown}");
    // An unknown scheme keeps the facade's list of schemes.
    let unknown = babelqueue::Error::UnsupportedScheme {
        scheme: "mqtt".into(),
        hint: "use one of memory://".into(),
    };
    assert!(
        babelqueue_cli::cli_hint(unknown)
            .to_string()
            .contains("use one of memory://")
    );
    // A known scheme without "://" keeps the facade's explanation.
    let typo = babelqueue::Error::UnsupportedScheme {
        scheme: "amqp".into(),
        hint: "the broker URL has no \"://\" after \"amqp\"".into(),
    };
    let shown = babelqueue_cli::cli_hint(typo).to_string();
    assert!(
        shown.contains("no \"://\"") && !shown.contains("rebuild"),
        "{shown}"
    );
}

#[test]
fn every_scheme_feature_is_a_feature_of_the_cli_and_on_by_default() {
    let manifest = include_str!("../../Cargo.toml");
    let features = manifest
        .split("[features]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [features] table");
    let full = features
        .lines()
        .find(|l| l.starts_with("full = "))
        .expect("a full feature");
    assert!(features.contains("default = [\"full\"]"), "{features}");
    for scheme in babelqueue::SCHEMES.iter().filter(|s| !s.feature.is_empty()) {
        let feature = scheme.feature;
        assert!(
            features.contains(&format!("\n{feature} = [\"babelqueue/{feature}\"")),
            "the hint for {}:// names a `{feature}` feature the CLI lacks",
            scheme.scheme
        );
        assert!(
            full.contains(&format!("\"{feature}\"")),
            "full lacks {feature}"
        );
    }
}

#[test]
fn every_broker_command_takes_the_url_first_or_from_babelqueue_url() {
    const URL: &str = "mqtt://user:hunter2@localhost";
    let commands: &[&[&str]] = &[
        &["publish", "--queue", "q", "--urn", "urn:a"],
        &["consume", "--queue", "q", "--max", "1"],
        &["dlq", "list", "--queue", "q"],
        &["dlq", "redrive", "--queue", "q"],
        &["dlq", "show", "--queue", "q", "id-1"],
        &["dlq", "retry", "--queue", "q", "id-1"],
        &["dlq", "remove", "--queue", "q", "id-1", "id-2"],
        &["serve", "--queue", "q"],
    ];
    for command in commands {
        // The subcommand, then the URL as the first positional argument.
        let verbs = if command[0] == "dlq" { 2 } else { 1 };
        let mut first: Vec<&str> = command[..verbs].to_vec();
        first.push(URL);
        first.extend(&command[verbs..]);
        for (args, env) in [
            (first.clone(), vec![]),
            (command.to_vec(), vec![("BABELQUEUE_URL", URL)]),
        ] {
            let out = babelqueue_with(&args, None, &env);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", printed(&out));
            assert!(
                printed(&out).contains("unsupported broker URL scheme \"mqtt\""),
                "{args:?}: {}",
                printed(&out)
            );
            assert!(!printed(&out).contains("hunter2"), "{}", printed(&out));
        }
        // Neither: a usage error that says what to do.
        let out = babelqueue(command, None);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {}", printed(&out));
    }
    let out = babelqueue(&["dlq", "show", "--queue", "q", "id-1"], None);
    assert!(
        common::stderr(&out).contains("no broker URL")
            && common::stderr(&out).contains("BABELQUEUE_URL"),
        "{}",
        printed(&out)
    );
    // The older `--url` still works; the URL given twice does not.
    let out = babelqueue(&["dlq", "show", "--url", URL, "--queue", "q", "id-1"], None);
    assert!(
        printed(&out).contains("unsupported broker URL scheme"),
        "{}",
        printed(&out)
    );
    let out = babelqueue(
        &["dlq", "show", URL, "--url", URL, "--queue", "q", "id-1"],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", printed(&out));
}
