//! How charts print numbers, and wrapping of their notes. Only Rust's own
//! float formatting, so the same value prints the same everywhere.

/// Three significant digits at most, with an SI suffix: `3.6 M`, `91 M`,
/// `950 k`, `0.25`.
pub fn si(v: f64) -> String {
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, " G"),
        a if a >= 1e6 => (v / 1e6, " M"),
        a if a >= 1e4 => (v / 1e3, " k"),
        _ => (v, ""),
    };
    format!("{}{suffix}", significant(scaled))
}

/// A number with up to three significant digits and no trailing zeros:
/// `1.27`, `12.5`, `325`, `1,425`, `0.043`.
pub fn significant(v: f64) -> String {
    let a = v.abs();
    let decimals = if a == 0.0 || a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        // 0.0123 -> 4 decimals
        (2.0 - a.log10().floor()).clamp(2.0, 6.0) as usize
    };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    group_thousands(&text)
}

fn group_thousands(text: &str) -> String {
    let (sign, rest) = text.strip_prefix('-').map_or(("", text), |r| ("-", r));
    let (int, frac) = rest
        .split_once('.')
        .map_or((rest, None), |(i, f)| (i, Some(f)));
    if int.len() <= 3 {
        return text.to_owned();
    }
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// Seconds: `1.32 s`, `85 ms` below one second.
pub fn seconds(v: f64) -> String {
    // below 0.9995 s, so that 0.9996 s prints as 1 s, not 1000 ms
    if v.abs() < 0.9995 && v != 0.0 {
        format!("{} ms", significant(v * 1000.0))
    } else {
        format!("{} s", significant(v))
    }
}

/// Bytes as B, kB, MB (powers of ten, as the tables print them).
pub fn bytes(v: f64) -> String {
    match v.abs() {
        a if a >= 1e9 => format!("{} GB", significant(v / 1e9)),
        a if a >= 1e6 => format!("{} MB", significant(v / 1e6)),
        a if a >= 1e4 => format!("{} kB", significant(v / 1e3)),
        _ => format!("{} B", significant(v)),
    }
}

/// A ratio, two decimals between 0.1 and 10: `0.25x`, `1.34x`, `5.7x`,
/// `0.043x`, `14.2x`.
pub fn ratio(v: f64) -> String {
    if (0.1..10.0).contains(&v.abs()) {
        let text = format!("{v:.2}");
        format!("{}x", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{}x", significant(v))
    }
}

/// The lines of `text` wrapped at `width` characters (words longer than
/// that stand alone).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The median of `values` (the mean of the middle two for an even
/// count); `None` for none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_with_three_significant_digits() {
        let cases = [
            (si(3_604_000.0), "3.6 M"),
            (si(91_400_000.0), "91.4 M"),
            (si(16_400_000.0), "16.4 M"),
            (si(950_000.0), "950 k"),
            (si(0.25), "0.25"),
            (si(2.0e9), "2 G"),
            (significant(1425.0), "1,425"),
            (significant(999.0), "999"),
            (seconds(0.9996), "1 s"),
            (significant(14_250.0), "14,250"),
            (significant(-123_456.0), "-123,456"),
            (significant(0.0123), "0.0123"),
            (significant(0.0), "0"),
            (seconds(1.318), "1.32 s"),
            (seconds(0.085), "85 ms"),
            (bytes(325.6e6), "326 MB"),
            (bytes(3270.0), "3,270 B"),
            (bytes(13_700.0), "13.7 kB"),
            (ratio(0.2512), "0.25x"),
            (ratio(1.0), "1x"),
            (ratio(5.7), "5.7x"),
            (ratio(0.0432), "0.0432x"),
            (ratio(14.26), "14.3x"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn wrapping_keeps_words_and_width() {
        let lines = wrap("one two three four five six seven", 10);
        assert_eq!(lines, ["one two", "three four", "five six", "seven"]);
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            ["averyveryverylongword", "x"]
        );
        assert!(wrap("   ", 10).is_empty());
    }

    #[test]
    fn the_median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
