//! `[code.flows]` end to end with fixture upstreams: a token a rule covers reaches the
//! servers the rule lists and is refused, naming the rule, everywhere else (from a
//! program's input and from execute); inside a run, a value an earlier result held is
//! held to the same rule. The run goes on after a refusal, and the audit log records it.

mod common;
use common::code::*;
use common::*;
use serde_json::{json, Value};

/// E-mails that alpha returned may go back to alpha only; card numbers nowhere.
fn flows_setup() -> (TestDir, std::path::PathBuf) {
    setup_audited(
        "pii = true\n[code.flows.contacts]\nclasses = [\"email\"]\nfrom = [\"alpha\"]\nto = [\"alpha\"]\n\
         [code.flows.cards]\nclasses = [\"card\"]\nto = []\n",
        "",
        "",
    )
}

#[tokio::test]
async fn a_flow_rule_lets_a_token_reach_allowed_servers_only() {
    let (dir, config) = flows_setup();
    let (client, _) = connect_stdio(&config, &[]).await;
    // The e-mail leaves the run as a token that remembers alpha returned it.
    let s = expect(
        &client,
        "const r = await tools.alpha.echo({message: 'ada@example.org'}); return r.arguments.message",
        "ok",
    )
    .await;
    let token = s["result"].as_str().unwrap().to_string();
    assert!(token.starts_with("[[EMAIL:"), "{s}");

    // Passed back in input: to beta it is refused with the rule's name, the run goes on,
    // and the same token reaches alpha as the real value.
    let r = call(
        &client,
        "execute_code",
        json!({"input": {"to": token}, "code": "
            let refused;
            try { await tools.beta.status({to: input.to}) } catch (e) { refused = [e.code, e.message] }
            const r = await tools.alpha.echo({message: input.to});
            return {refused, reached: r.arguments.message === 'ada@example.org', seen: input.to.startsWith('[[EMAIL:')}"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["status"], "ok", "{}", text(&r));
    assert_eq!(s["result"]["refused"][0], "denied", "{s}");
    let why = s["result"]["refused"][1].as_str().unwrap();
    assert!(
        why.contains("flow rule \"contacts\"")
            && why.contains("to beta")
            && why.contains("alpha only"),
        "{why}"
    );
    assert_eq!(s["result"]["reached"], true, "{s}");
    assert_eq!(
        s["result"]["seen"], true,
        "a covered token stays a token inside the program"
    );
    assert_eq!(
        s["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["server"].as_str().unwrap(), c["ok"].as_bool().unwrap()))
            .collect::<Vec<_>>(),
        [("beta", false), ("alpha", true)]
    );

    // execute goes through the same gate.
    let r = call(
        &client,
        "execute",
        json!({"tool": "beta/status", "arguments": {"to": token}}),
    )
    .await;
    assert!(
        r.is_error == Some(true) && text(&r).contains("contacts"),
        "{}",
        text(&r)
    );

    // The refusals are audited as calls not made, naming the rule.
    let refused: Vec<Value> = audit_records(&dir)
        .into_iter()
        .filter(|e| (e["server"].as_str(), e["tool"].as_str()) == (Some("beta"), Some("status")))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for e in &refused {
        assert_eq!(e["outcome"], "not_run", "{e}");
        assert_eq!(e["error"], "flow rule contacts", "{e}");
    }
}

#[tokio::test]
async fn inside_a_run_a_value_a_result_held_is_held_to_the_rules() {
    let (dir, config) = flows_setup();
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(
        &client,
        "const r = await tools.alpha.echo({message: 'write to ada@example.org'});
         const mail = r.arguments.message.split(' ').pop();
         const out = [];
         try { await tools.beta.status({to: mail}); out.push('sent') } catch (e) { out.push(e.code) }
         // Not covered: an e-mail no result held; a card number goes nowhere once it left as a token.
         await tools.beta.status({to: 'bob@example.org'}); out.push('other sent');
         await tools.alpha.echo({message: mail}); out.push('back to alpha');
         return out",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!(["denied", "other sent", "back to alpha"]),
        "{s}"
    );
    let e = audit_records(&dir)
        .into_iter()
        .find(|e| e["outcome"] == "not_run")
        .unwrap();
    assert_eq!(
        (
            e["server"].as_str(),
            e["tool"].as_str(),
            e["error"].as_str()
        ),
        (Some("beta"), Some("status"), Some("flow rule contacts"))
    );

    // A rule by class alone: a card token may go to no server at all.
    let s = expect(&client, "return 'card 4111 1111 1111 1111'", "ok").await;
    let token = s["result"]
        .as_str()
        .unwrap()
        .strip_prefix("card ")
        .unwrap()
        .to_string();
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": token}}),
    )
    .await;
    assert!(
        r.is_error == Some(true)
            && text(&r).contains("\"cards\"")
            && text(&r).contains("no server"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn a_value_one_run_saves_keeps_its_origin_in_the_next_run_whatever_its_case() {
    let (_dir, config) = setup_audited(
        "pii = true\n[code.flows.contacts]\nclasses = [\"email\"]\nfrom = [\"alpha\"]\nto = [\"alpha\"]\n\
         [code.workspace]\ndir = \"ws\"\n",
        "",
        "",
    );
    let (client, _) = connect_stdio(&config, &[]).await;
    // Run 1 reads an e-mail from alpha and saves it raw, in a file and in state; inside the
    // run, the value in capitals is still the value.
    let s = expect(
        &client,
        "const r = await tools.alpha.echo({message: 'Ada.Lovelace@example.org'});
         const email = r.arguments.message;
         await fs.writeFile('./workspace/lead.txt', 'contact: ' + email);
         await state.set('lead', {email});
         try { await tools.beta.status({to: email.toUpperCase()}); return 'sent' } catch (e) { return e.code }",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"], "denied",
        "a change of case is the same value: {s}"
    );

    // Run 2 finds the value in the file and in state: the rule still holds it, in any case,
    // and it still reaches the server the rule allows.
    let s = expect(
        &client,
        "const out = [];
         const send = async (to) => { try { await tools.beta.status({to}); out.push('sent') } catch (e) { out.push(e.code) } };
         const email = (await fs.readFile('./workspace/lead.txt')).split(': ')[1];
         await send(email);
         await send(email.toLowerCase());
         await send('mailto:' + email.toUpperCase());
         await send((await state.get('lead')).email);
         const r = await tools.alpha.echo({message: email});
         out.push(r.arguments.message.toLowerCase() === 'ada.lovelace@example.org' ? 'alpha' : 'lost');
         return out",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!(["denied", "denied", "denied", "denied", "alpha"]),
        "{s}"
    );
    client.cancel().await.unwrap();
}
