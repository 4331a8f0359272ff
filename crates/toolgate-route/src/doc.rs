//! A tool as a BM25F document: its fields (name, title, description, parameters, server,
//! example tasks, and the description's notes to the model) and the per-field frequencies
//! of their terms and phrase bigrams.

use super::text::{bigram, Analyzer};
use serde_json::Value;
use std::collections::HashMap;
use toolgate_core::catalog::ToolRecord;

mod notes;

/// The fields of a tool document, in `Bm25fParams` array order.
pub(crate) const N_FIELDS: usize = 7;
/// Field positions.
pub(crate) const NAME: usize = 0;
pub(crate) const TITLE: usize = 1;
pub(crate) const DESCRIPTION: usize = 2;
pub(crate) const PARAMS: usize = 3;
pub(crate) const SERVER: usize = 4;
pub(crate) const EXAMPLES: usize = 5;
/// The description's instructions to the model and its examples (`notes`): a share of
/// the description weighted less. Their terms count in the description's length, and the
/// field's length is the description's, so it is normalised as the description is.
pub(crate) const NOTES: usize = 6;

/// One analysed tool.
#[derive(Debug, Default)]
pub(crate) struct ToolDoc {
    /// Each distinct term with its frequency in each field (saturating; fields are short).
    pub tf: Vec<(String, [u16; N_FIELDS])>,
    /// Length of each field in terms.
    pub lens: [u16; N_FIELDS],
}

/// Analyses a tool's fields, with `examples` (tasks known to have needed the tool, see
/// [`super::examples`]) as the last. Adjacent words within one text also count as a
/// phrase term.
pub(crate) fn analyze_tool(analyzer: &Analyzer, tool: &ToolRecord, examples: &[String]) -> ToolDoc {
    let mut tf: HashMap<String, [u16; N_FIELDS]> = HashMap::new();
    let mut lens = [0u16; N_FIELDS];
    let mut texts: [Vec<&str>; N_FIELDS] = Default::default();
    texts[NAME].push(&tool.id.name);
    texts[TITLE].extend(tool.title());
    let (body, notes) = notes::split(tool.description());
    texts[DESCRIPTION].push(&body);
    texts[NOTES].extend(notes);
    schema_texts(tool.input_schema(), 0, &mut texts[PARAMS]);
    texts[SERVER].push(&tool.id.server);
    texts[EXAMPLES].extend(examples.iter().map(String::as_str));
    let (mut terms, mut words) = (Vec::new(), Vec::new());
    for (field, field_texts) in texts.iter().enumerate() {
        for text in field_texts {
            terms.clear();
            words.clear();
            analyzer.terms(text, &mut terms, Some(&mut words));
            let phrases = words.windows(2).map(|w| bigram(&w[0], &w[1]));
            for term in terms.drain(..).chain(phrases) {
                let slot = &mut tf.entry(term).or_default()[field];
                *slot = slot.saturating_add(1);
                lens[field] = lens[field].saturating_add(1);
            }
        }
    }
    // The notes are part of the description: one length, one normalisation.
    lens[DESCRIPTION] = lens[DESCRIPTION].saturating_add(lens[NOTES]);
    lens[NOTES] = lens[DESCRIPTION];
    ToolDoc {
        tf: tf.into_iter().collect(),
        lens,
    }
}

/// Collects property names, titles, descriptions and string enum values of an input
/// schema, nested objects and arrays included (depth-limited against odd schemas).
fn schema_texts<'a>(schema: &'a Value, depth: usize, out: &mut Vec<&'a str>) {
    let Value::Object(map) = schema else {
        return;
    };
    if depth > 8 {
        return;
    }
    for key in ["title", "description"] {
        if depth > 0 {
            out.extend(map.get(key).and_then(Value::as_str));
        }
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        out.extend(values.iter().filter_map(Value::as_str));
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, sub) in props {
            out.push(name);
            schema_texts(sub, depth + 1, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get(key) {
            schema_texts(sub, depth + 1, out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(subs)) = map.get(key) {
            for sub in subs {
                schema_texts(sub, depth + 1, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::catalog::{parse_catalog, Catalog};

    #[test]
    fn a_descriptions_notes_are_their_own_field_of_the_descriptions_length() {
        let c = Catalog::from_entries(
            parse_catalog(
                r#"[{"server": "b", "tool": {"name": "fill_form", "description":
                "Fill out form fields. ALWAYS prefer this tool. Example: check Remember Me."}}]"#,
            )
            .unwrap(),
        );
        let doc = analyze_tool(&Analyzer::new(), &c.tools()[0], &[]);
        let tf = |term: &str| doc.tf.iter().find(|(t, _)| t == term).map(|(_, tf)| *tf);
        let fill = tf("fill").unwrap();
        let prefer = tf("prefer").unwrap();
        let remember = tf("rememb").unwrap();
        assert!(fill[DESCRIPTION] == 1 && fill[NOTES] == 0, "{fill:?}");
        assert!(prefer[DESCRIPTION] == 0 && prefer[NOTES] == 1, "{prefer:?}");
        assert!(remember[DESCRIPTION] == 0 && remember[NOTES] == 1);
        assert_eq!(doc.lens[NOTES], doc.lens[DESCRIPTION]);
        assert!(doc.lens[DESCRIPTION] > 6, "{:?}", doc.lens);
    }
}
