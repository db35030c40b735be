//! The bytes a real kube-apiserver 1.36 sent for 100,000 ConfigMaps
//! (`shared/fixtures/kube-apiserver-1.36/`, beside the project: list,
//! WatchList and metadata-only list, JSON and protobuf, gzip'd), for tests
//! and measurements. Found at `$KCONTROL_FIXTURES/kube-apiserver-1.36`, or
//! in `shared/fixtures/kube-apiserver-1.36` of the first ancestor of the
//! current directory that has one.

use std::io::Read as _;
use std::path::PathBuf;

/// The fixture directory, if there is one.
pub fn dir() -> Option<PathBuf> {
    const SUB: &str = "kube-apiserver-1.36";
    if let Some(root) = std::env::var_os("KCONTROL_FIXTURES") {
        return Some(PathBuf::from(root).join(SUB)).filter(|p| p.is_dir());
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .map(|a| a.join("shared").join("fixtures").join(SUB))
        .find(|p| p.is_dir())
}

/// The unpacked bytes of `name` (`list.pb`, `watchlist.json`...); `None`
/// when there is no fixture directory or no such file in it (a clean
/// clone, CI: callers skip, saying so).
///
/// # Errors
/// When the file exists but cannot be read or unpacked.
pub fn load(name: &str) -> Option<std::io::Result<Vec<u8>>> {
    let path = dir()?.join(format!("{name}.gz"));
    if !path.is_file() {
        return None;
    }
    Some((|| {
        let file = std::fs::File::open(&path)?;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(std::io::BufReader::new(file)).read_to_end(&mut out)?;
        Ok(out)
    })())
}

/// The first `max` unpacked bytes of `name` (or all, when shorter): for
/// measurements that need only the start of a list; `None` as [`load`].
///
/// # Errors
/// When the file exists but cannot be read or unpacked.
pub fn load_prefix(name: &str, max: usize) -> Option<std::io::Result<Vec<u8>>> {
    let path = dir()?.join(format!("{name}.gz"));
    if !path.is_file() {
        return None;
    }
    Some((|| {
        let file = std::fs::File::open(&path)?;
        let mut out = Vec::with_capacity(max);
        flate2::read::GzDecoder::new(std::io::BufReader::new(file))
            .take(max as u64)
            .read_to_end(&mut out)?;
        Ok(out)
    })())
}

/// User + system CPU time of this process so far, in seconds, from
/// `/proc/self/stat` (Linux; 0 elsewhere), at the kernel's 10 ms ticks.
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // the command name (field 2) may hold spaces: count after its ')'
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 1..)) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}
