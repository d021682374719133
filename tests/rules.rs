use tollgate::rules::Rules;

fn show(label: &str, yaml: &str) {
    match Rules::from_yaml(yaml) {
        Ok(r) => println!("== {label}: OK {} limits", r.limits().len()),
        Err(e) => {
            println!("== {label}:\n{e}");
            for x in e.errors() {
                println!("   {:?}", x);
            }
        }
    }
}

#[test]
fn probe() {
    show("empty", "");
    show("blockrl", "domain: d\ndescriptors:\n  - key: method\n    rate_limit:\n      unit: minute\n      unit_multiplier: 0\n      requests_per_unit: 1\n");
    show("dupdomain", "domain: d\ndomain: e\n");
    show(
        "dupkey",
        "domain: d\ndescriptors:\n  - key: method\n    key: path\n",
    );
    show(
        "dupsource",
        "domain: d\nsources:\n  a: { header: x }\n  a: { header: y }\n",
    );
    show("badsource", "domain: d\nsources:\n  a: { heder: x }\n");
    show("badsource2", "domain: d\nsources:\n  a: 5\n");
    show("unknown", "domain: d\nextra: 1\n");
    show("rpu", "domain: d\ndescriptors:\n  - key: method\n    rate_limit: { unit: minute, requests_per_unit: many }\n");
    show("unit", "domain: d\ndescriptors:\n  - key: method\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n");
    show("alg", "domain: d\ndescriptors:\n  - key: method\n    rate_limit: { unit: minute, requests_per_unit: 1, algorithm: magic }\n");
    let flow = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    show("flow", &flow);
    let mut deep = String::from("domain: d\ndescriptors:\n");
    for i in 0..100 {
        let ind = "  ".repeat(2 * i);
        deep.push_str(&format!("{ind}  - key: method\n{ind}    descriptors:\n"));
    }
    show("deep100", &deep);
    let mut bomb = String::from("domain: d\nsources:\n  s0: &a0 [{value: lol}, {value: lol}, {value: lol}, {value: lol}, {value: lol}, {value: lol}, {value: lol}, {value: lol}, {value: lol}, {value: lol}]\n");
    for i in 1..10 {
        bomb.push_str(&format!(
            "  s{i}: &a{i} [{}]\n",
            vec![format!("*a{}", i - 1); 10].join(", ")
        ));
    }
    let t = std::time::Instant::now();
    show("bomb", &bomb);
    println!("bomb took {:?}", t.elapsed());
}
