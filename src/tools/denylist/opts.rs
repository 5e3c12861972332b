//! A command's options read the way getopt would, for the rules that
//! depend on them (`rm -r`, `--recur`, `-t DIR`, options after operands).

use super::expand::EWord;

/// A command's options, parsed the way getopt would: short clusters, long
/// options (`--name=value`), `--` ending them, options after operands.
pub(super) struct Opts {
    pub(super) shorts: Vec<char>,
    pub(super) longs: Vec<String>,
    /// Values of short options that take one, by option letter.
    pub(super) values: Vec<(char, String)>,
    pub(super) positional: Vec<EWord>,
}

impl Opts {
    /// `with_value`: short options that take a value; `long_value`: long ones.
    pub(super) fn parse(args: &[EWord], with_value: &str, long_value: &[&str]) -> Opts {
        let mut o = Opts {
            shorts: Vec::new(),
            longs: Vec::new(),
            values: Vec::new(),
            positional: Vec::new(),
        };
        let mut it = args.iter();
        let mut done = false;
        while let Some(a) = it.next() {
            let t = a.text.as_str();
            if done || t == "-" || !t.starts_with('-') {
                o.positional.push(a.clone());
            } else if t == "--" {
                done = true;
            } else if let Some(long) = t.strip_prefix("--") {
                let (name, _) = long.split_once('=').unwrap_or((long, ""));
                if !long.contains('=')
                    && long_value
                        .iter()
                        .any(|l| l.starts_with(name) && !name.is_empty())
                {
                    let v = it.next().map(|w| w.text.clone()).unwrap_or_default();
                    o.longs.push(format!("{name}={v}"));
                } else {
                    o.longs.push(long.to_string());
                }
            } else {
                let cluster: Vec<char> = t[1..].chars().collect();
                for (k, &c) in cluster.iter().enumerate() {
                    o.shorts.push(c);
                    if with_value.contains(c) {
                        let rest: String = cluster[k + 1..].iter().collect();
                        let v = if rest.is_empty() {
                            it.next().map(|w| w.text.clone()).unwrap_or_default()
                        } else {
                            rest
                        };
                        o.values.push((c, v));
                        break;
                    }
                }
            }
        }
        o
    }

    pub(super) fn has_short(&self, c: char) -> bool {
        self.shorts.contains(&c)
    }

    /// A long option given as `name` or any unambiguous-looking prefix of it
    /// at least `min` characters long (getopt accepts `--recur`).
    pub(super) fn has_long(&self, name: &str, min: usize) -> bool {
        self.longs.iter().any(|l| {
            let l = l.split('=').next().unwrap_or(l);
            l.len() >= min && name.starts_with(l)
        })
    }

    pub(super) fn value_of(&self, short: char, long: &str) -> Option<String> {
        self.values
            .iter()
            .find(|(c, _)| *c == short)
            .map(|(_, v)| v.clone())
            .or_else(|| {
                self.longs.iter().find_map(|l| {
                    let (n, v) = l.split_once('=')?;
                    (n.len() >= 3 && long.starts_with(n)).then(|| v.to_string())
                })
            })
    }
}
