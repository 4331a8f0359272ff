//! Static token vectors: a sentence embedding without a model at run time.
//!
//! Every token of all-MiniLM-L6-v2's vocabulary was passed through the model once, alone
//! (`[CLS] token [SEP]`, mean-pooled), reduced by PCA and weighted by the token's rank in
//! the vocabulary (rare tokens weigh more), then stored as 8-bit rows with one scale each
//! (`scripts/distill-vectors.sh` writes the file; `docs/routing.md` has the method and the
//! figures). A text's vector is then the mean of its tokens' rows, normalised: a
//! tokenisation and a sum, microseconds instead of a forward pass.
//!
//! The file: `TGSV1\0`, then `dim` and `n` (u32, little-endian), `n` f32 scales, `n * dim`
//! i8 values, and the vocabulary, one token per line (row `i` is line `i`).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use unicode_normalization::UnicodeNormalization;

const MAGIC: &[u8; 6] = b"TGSV1\0";
/// Characters in a word past which BERT's WordPiece gives up (`[UNK]`).
const MAX_WORD_CHARS: usize = 100;
/// Tokens of a text that count (the model's own limit, as the full embedder).
const MAX_TOKENS: usize = 256;

/// Why a vectors file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct VectorsError(String);

/// The vectors route ships: distilled from all-MiniLM-L6-v2 (Apache-2.0; `assets/README.md`).
static BUILTIN: &[u8] = include_bytes!("../assets/route-vectors.tgsv");

/// A vocabulary with one vector per token.
pub struct StaticVectors {
    dim: usize,
    scales: Vec<f32>,
    /// The whole file; the rows start at `values_at`.
    bytes: Cow<'static, [u8]>,
    values_at: usize,
    /// Where each token starts in `bytes` (one more entry: the end of the last, plus
    /// its newline), and an open-addressing table of token ids by the hash of their
    /// text (`id + 1`, 0 for empty): half a megabyte where a map of strings took several.
    starts: Vec<u32>,
    table: Vec<u32>,
    unk: Option<u32>,
    /// The most characters a token of the vocabulary has: no longer piece is looked up.
    longest: usize,
}

impl std::fmt::Debug for StaticVectors {
    /// The shape, not the megabytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticVectors")
            .field("dim", &self.dim)
            .field("tokens", &self.len())
            .finish()
    }
}

impl StaticVectors {
    /// The vectors built into this binary, read once.
    pub fn builtin() -> Arc<StaticVectors> {
        static ONCE: OnceLock<Arc<StaticVectors>> = OnceLock::new();
        ONCE.get_or_init(|| {
            Arc::new(
                Self::parse(Cow::Borrowed(BUILTIN))
                    .expect("the built-in route vectors are a valid TGSV1 file"),
            )
        })
        .clone()
    }

    /// Reads the format written by `toolgate`'s `distill_vectors` example.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, VectorsError> {
        Self::parse(Cow::Owned(bytes))
    }

    fn parse(bytes: Cow<'static, [u8]>) -> Result<Self, VectorsError> {
        let err = |what: &str| VectorsError(what.to_string());
        if u32::try_from(bytes.len()).is_err() {
            return Err(err("larger than 4 GiB"));
        }
        let rest = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or_else(|| err("not a TGSV1 file"))?;
        let u32_at = |b: &[u8], i: usize| -> Result<usize, VectorsError> {
            let s = b.get(i..i + 4).ok_or_else(|| err("truncated header"))?;
            Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
        };
        let dim = u32_at(rest, 0)?;
        let n = u32_at(rest, 4)?;
        let rest = &rest[8..];
        let scales_len = n * 4;
        let values_len = n * dim;
        if dim == 0 || rest.len() < scales_len + values_len {
            return Err(err("truncated vectors"));
        }
        let scales = rest[..scales_len]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let vocab_at = MAGIC.len() + 8 + scales_len + values_len;
        let text =
            std::str::from_utf8(&bytes[vocab_at..]).map_err(|_| err("vocabulary is not UTF-8"))?;
        if !text.ends_with('\n') {
            return Err(err("the vocabulary does not end with a newline"));
        }
        let mut starts = Vec::with_capacity(n + 1);
        let mut at = vocab_at;
        for line in text.split_terminator('\n') {
            starts.push(at as u32);
            at += line.len() + 1;
        }
        if starts.len() != n {
            return Err(err("vocabulary and vectors differ in length"));
        }
        starts.push(at as u32);
        let mut table = vec![0u32; (2 * n).next_power_of_two()];
        let mask = table.len() - 1;
        for id in 0..n as u32 {
            let mut slot = fnv(token_at(&bytes, &starts, id)) as usize & mask;
            while table[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            table[slot] = id + 1;
        }
        let values_at = MAGIC.len() + 8 + scales_len;
        let longest = text
            .split_terminator('\n')
            .map(|t| t.chars().count())
            .max()
            .unwrap_or(0);
        Ok(Self {
            dim,
            scales,
            bytes,
            values_at,
            starts,
            table,
            unk: None,
            longest,
        })
        .map(|mut v| {
            v.unk = v.id("[UNK]");
            v
        })
    }

    /// Length of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The text's unit vector (zero when no token of it is known).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut ids = Vec::new();
        wordpiece(text, |t| self.id(t), self.unk, self.longest, &mut ids);
        self.mean(&ids)
    }

    /// The text's unit vector, or `None` when the vectors know too little of it to have
    /// an opinion: fewer than half its tokens are words the model was trained on (the
    /// model is English; a CJK character is a token of its own and an unknown word is
    /// `[UNK]`, and neither carries much of the text's meaning there).
    pub fn embed_known(&self, text: &str) -> Option<Vec<f32>> {
        let mut ids = Vec::new();
        wordpiece(text, |t| self.id(t), self.unk, self.longest, &mut ids);
        self.known_mean(&ids)
    }

    /// [`Self::embed_known`] of each text, tokenising a text that is another one followed
    /// by a space and more words (a task and the task read with its meanings,
    /// `synonyms::with_meanings`) only past the other: whitespace ends a word and NFD
    /// reorders nothing across a space, so its tokens are the other's and then its own,
    /// and the vector is the same to the last bit (tested).
    pub(crate) fn embed_known_each(&self, texts: &[&str]) -> Vec<Option<Vec<f32>>> {
        let mut ids: Vec<Option<Vec<u32>>> = vec![None; texts.len()];
        // The texts no other extends are tokenised whole first, then the others after them.
        for pass in 0..2 {
            for (i, text) in texts.iter().enumerate() {
                let base = (0..texts.len()).find(|&j| j != i && extends(text, texts[j]));
                if ids[i].is_some() || (pass == 0) == base.is_some() {
                    continue;
                }
                let mut own = Vec::new();
                match base.and_then(|j| ids[j].as_ref().map(|b| (j, b))) {
                    Some((j, b)) => {
                        own.extend_from_slice(b);
                        let rest = &text[texts[j].len()..];
                        wordpiece(rest, |t| self.id(t), self.unk, self.longest, &mut own);
                    }
                    None => wordpiece(text, |t| self.id(t), self.unk, self.longest, &mut own),
                }
                ids[i] = Some(own);
            }
        }
        ids.iter()
            .map(|ids| self.known_mean(ids.as_deref().unwrap_or_default()))
            .collect()
    }

    /// The mean of `ids`, or `None` when too few of them are known words.
    fn known_mean(&self, ids: &[u32]) -> Option<Vec<f32>> {
        let weak = ids
            .iter()
            .filter(|&&id| Some(id) == self.unk || self.token(id).chars().all(is_cjk))
            .count();
        (!ids.is_empty() && weak * 2 < ids.len()).then(|| self.mean(ids))
    }

    /// Number of tokens in the vocabulary.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn token(&self, id: u32) -> &str {
        token_at(&self.bytes, &self.starts, id)
    }

    /// [`Self::token`]'s bytes.
    fn token_bytes(&self, id: u32) -> &[u8] {
        token_bytes_at(&self.bytes, &self.starts, id)
    }

    fn id(&self, token: &str) -> Option<u32> {
        let mask = self.table.len() - 1;
        let mut slot = fnv(token) as usize & mask;
        loop {
            let id = self.table[slot].checked_sub(1)?;
            // Bytes, not `token`'s str: the vocabulary was checked to be UTF-8 when
            // loaded, and this probe runs for every piece a task's words are tried as.
            if self.token_bytes(id) == token.as_bytes() {
                return Some(id);
            }
            slot = (slot + 1) & mask;
        }
    }

    fn mean(&self, ids: &[u32]) -> Vec<f32> {
        let mut sum = vec![0f32; self.dim];
        for &id in ids.iter().take(MAX_TOKENS) {
            if Some(id) == self.unk {
                continue;
            }
            let id = id as usize;
            let scale = self.scales[id];
            let at = self.values_at + id * self.dim;
            let row = &self.bytes[at..at + self.dim];
            for (s, &v) in sum.iter_mut().zip(row) {
                *s += scale * f32::from(v as i8);
            }
        }
        normalize(sum)
    }
}

/// True when `text` is `base` followed by a space and more (or `base` itself, which a
/// cut at the byte bound can make of it): its tokens are then `base`'s and the rest's.
fn extends(text: &str, base: &str) -> bool {
    !base.is_empty()
        && text
            .strip_prefix(base)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

/// Scales `v` to unit length (a zero vector stays zero).
pub(crate) fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Dot product; the cosine for unit vectors.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// FNV-1a, for the vocabulary's table.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Token `id`'s text: its line of the vocabulary (checked UTF-8 when the file was read).
fn token_at<'a>(bytes: &'a [u8], starts: &[u32], id: u32) -> &'a str {
    std::str::from_utf8(token_bytes_at(bytes, starts, id)).unwrap_or("")
}

/// Token `id`'s line of the vocabulary, as bytes.
fn token_bytes_at<'a>(bytes: &'a [u8], starts: &[u32], id: u32) -> &'a [u8] {
    let (from, to) = (
        starts[id as usize] as usize,
        starts[id as usize + 1] as usize - 1,
    );
    &bytes[from..to]
}

/// BERT's uncased tokenisation: clean, split CJK ideographs apart, lower-case and strip
/// accents, split on whitespace and punctuation, then WordPiece (longest known prefix,
/// `##` continuations; a word with an unknown piece is `[UNK]`).
/// `vocab` gives a piece's token id; `longest` is the most characters a token has (a
/// longer piece is not looked up: a long run of letters costs the square of the token
/// length, not the cube of the run's).
pub(crate) fn wordpiece(
    text: &str,
    vocab: impl Fn(&str) -> Option<u32>,
    unk: Option<u32>,
    longest: usize,
    out: &mut Vec<u32>,
) {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, words: &mut Vec<String>| {
        if !word.is_empty() {
            words.push(std::mem::take(word));
        }
    };
    for c in text.nfd() {
        if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if is_mark(c) {
            continue; // accents, after NFD
        }
        if c.is_whitespace() {
            flush(&mut word, &mut words);
        } else if is_punctuation(c) || is_cjk(c) {
            flush(&mut word, &mut words);
            words.push(c.to_lowercase().collect());
        } else {
            word.extend(c.to_lowercase());
        }
    }
    flush(&mut word, &mut words);
    let mut piece = String::new();
    for word in &words {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > MAX_WORD_CHARS {
            out.extend(unk);
            continue;
        }
        let start_len = out.len();
        let mut start = 0;
        let mut ok = true;
        while start < chars.len() {
            // Tried from the longest piece a token could be ("##" counts: a
            // continuation's characters and its two are the token's).
            let cont = if start > 0 { 2 } else { 0 };
            let mut end = chars
                .len()
                .min(start.saturating_add(longest.saturating_sub(cont)));
            let mut found = None;
            while end > start {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |c| c.0);
                piece.push_str(&word[from..to]);
                if let Some(id) = vocab(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            out.truncate(start_len);
            out.extend(unk);
        }
    }
}

/// Combining marks (what accent stripping removes after NFD).
fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// BERT's punctuation: every ASCII non-alphanumeric printable, and Unicode punctuation.
fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    matches!(c as u32,
        0x2010..=0x2027 | 0x2030..=0x205E | 0x3000..=0x303F | 0xFF01..=0xFF0F
        | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65 | 0x00A1..=0x00BF)
        && !c.is_alphanumeric()
}

/// CJK ideographs, which BERT splits one by one.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(tokens: &[&str]) -> std::collections::HashMap<String, u32> {
        tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .collect()
    }

    #[test]
    fn wordpiece_splits_as_bert_does() {
        let v = vocab(&[
            "[UNK]", "un", "##aff", "##able", "run", "##ning", ",", "café", "cafe", "天", "气",
        ]);
        let mut out = Vec::new();
        // The longest token has 6 characters ("##able"); no bound splits the same.
        for longest in [6, usize::MAX] {
            out.clear();
            wordpiece(
                "Unaffable, RUNNING Café 天气 xyz",
                |t| v.get(t).copied(),
                Some(0),
                longest,
                &mut out,
            );
            assert_eq!(out, vec![1, 2, 3, 6, 4, 5, 8, 9, 10, 0]);
        }
    }

    /// Pieces longer than the vocabulary's longest token are not looked up: the same
    /// tokens as trying every length, for words of every length up to the bound on words
    /// (base64, long identifiers, runs of one letter).
    #[test]
    fn no_piece_longer_than_a_token_changes_nothing() {
        let v = StaticVectors::builtin();
        assert!(v.longest > 2 && v.longest < MAX_WORD_CHARS, "{}", v.longest);
        let mut text = String::from(
            "iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6AAAABHNCSVQICAgIfAhkiAAAAAlwSFlz \
             pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism \
             unbelievablyunremarkableunderstandings ##able café",
        );
        for n in [v.longest - 1, v.longest, v.longest + 1, MAX_WORD_CHARS] {
            text.push(' ');
            text.push_str(&"ab".repeat(n / 2 + 1)[..n]);
        }
        let (mut bounded, mut all) = (Vec::new(), Vec::new());
        wordpiece(&text, |t| v.id(t), v.unk, v.longest, &mut bounded);
        wordpiece(&text, |t| v.id(t), v.unk, usize::MAX, &mut all);
        assert_eq!(bounded, all);
        assert!(bounded.iter().filter(|&&id| Some(id) != v.unk).count() > 20);
    }

    #[test]
    fn the_builtin_vectors_place_meanings() {
        let v = StaticVectors::builtin();
        assert_eq!((v.dim(), v.len()), (256, 30522));
        let task = v.embed("any coupons I could use at this store?");
        let discounts = v.embed("get discounts. Lists current discounts and sales at a retailer.");
        let weather =
            v.embed("get forecast. Weather forecast for a city: temperature, rain and wind.");
        let norm: f32 = task.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        let (d, w) = (dot(&task, &discounts), dot(&task, &weather));
        assert!(d > w + 0.1, "discounts {d}, weather {w}");
    }

    #[test]
    fn a_reading_extending_another_embeds_as_if_alone() {
        let v = StaticVectors::builtin();
        let task = "Read /root/papers/a.pdf, then write a comparison report; café Ünïcode 東京?";
        let long = format!("{task} event schedule agenda date time");
        let texts = [long.as_str(), task, "unrelated words here", task, ""];
        let each = v.embed_known_each(&texts);
        for (text, got) in texts.iter().zip(&each) {
            assert_eq!(got, &v.embed_known(text), "{text}");
        }
        assert!(extends(&long, task) && extends(task, task) && !extends(task, "Read /ro"));
    }

    #[test]
    fn a_task_mostly_outside_the_vocabulary_has_no_vector() {
        let v = StaticVectors::builtin();
        assert!(v.embed_known("根据分类查询菜谱").is_none());
        assert!(v.embed_known("").is_none());
        assert!(v.embed_known("find recipes by category").is_some());
        // Mixed: two English words of five tokens are not half.
        assert!(v.embed_known("用 Bing 搜索关键词").is_none());
        assert!(StaticVectors::from_bytes(b"TGSV1\0\x01".to_vec()).is_err());
        assert!(StaticVectors::from_bytes(b"nope".to_vec()).is_err());
    }
}
